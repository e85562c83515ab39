// The CPU's max_pool2d of one plane, the loops of ops/cpu/pool.cpp's kernel: shared with the fused
// batch norm + relu + max pool (ops/cpu/batch_norm_relu_pool.cpp), which pools a plane it has just
// normalised in a scratch buffer.
#pragma once
#include <immintrin.h>
#include <algorithm>
#include <cstdint>
#include "ops/cpu/loops.h"
#include "ops/pool_math.h"

namespace tr::cpu {

// One output row of 2x2 windows inside the plane x (no padding or dilation), rows r0 / W and the
// next: y[ow] = the max of x[r0 + ow SW + {0, 1, W, W + 1}] and idx[ow] its flat position; the
// first maximum, a NaN replacing any number (the general loop's rule). Branch-free selects over
// chunks of kPoolChunk outputs with a fixed trip count: rows are short (OW = 14 or 7 in a 28x28 CNN),
// and a variable-length vector loop would leave most outputs to its branchy scalar remainder.
inline constexpr int kPoolChunk = 16;
template <typename T>
void max_pool_row_2x2(const T* x, int64_t r0, int64_t W, int64_t SW, int64_t OW, T* y, int64_t* idx) {
  using A = acc_t<T>;
  const T *x0 = x + r0, *x1 = x0 + W;
  for (int64_t ow0 = 0; ow0 < OW; ow0 += kPoolChunk) {
    const int64_t n = std::min<int64_t>(kPoolChunk, OW - ow0);
    A t[4][kPoolChunk] = {};  // the four taps of each window: (0, 0), (0, 1), (1, 0), (1, 1)
    for (int64_t k = 0; k < n; ++k) {
      const int64_t w0 = (ow0 + k) * SW;
      t[0][k] = A(x0[w0]);
      t[1][k] = A(x0[w0 + 1]);
      t[2][k] = A(x1[w0]);
      t[3][k] = A(x1[w0 + 1]);
    }
    A best[kPoolChunk];
    int32_t tap[kPoolChunk];
#pragma omp simd
    for (int k = 0; k < kPoolChunk; ++k) {
      A b = t[0][k];
      int32_t a = 0;
      for (int q = 1; q < 4; ++q) {
        const A v = t[q][k];
        const bool take = v > b || v != v;
        b = take ? v : b;
        a = take ? q : a;
      }
      best[k] = b;
      tap[k] = a;
    }
    for (int64_t k = 0; k < n; ++k) {
      y[ow0 + k] = T(best[k]);
      idx[ow0 + k] = r0 + (ow0 + k) * SW + (tap[k] & 1) + (tap[k] >> 1) * W;
    }
  }
}

// max_pool_row_2x2 for f32 with stride 2 along the row: 8 outputs a step, the even and odd columns
// of each input row separated by shuffles; the same selection rule, lane by lane. The row's last
// 1-7 outputs take masked loads and stores (fmnist_cnn's second pool has rows of 7). Returns how
// many outputs it wrote; the caller finishes the row (other dtypes: none).
template <typename T> int64_t max_pool_row_2x2_s2(const T*, int64_t, int64_t, int64_t, T*, int64_t*) {
  return 0;  // other dtypes: the chunked loop
}
inline int64_t max_pool_row_2x2_s2(const float* x, int64_t r0, int64_t W, int64_t OW, float* y, int64_t* idx) {
  const float *x0 = x + r0, *x1 = x0 + W;
  const __m256i lane8 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  auto first = [&](int64_t n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(n)), lane8); };  // lanes < n
  // the 16 floats at p (only the first n of them read) as their even and odd columns
  auto split = [&](const float* p, int64_t n, __m256& even, __m256& odd) {
    const __m256 lo = n >= 16 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, first(std::min<int64_t>(n, 8)));
    const __m256 hi = n >= 16 ? _mm256_loadu_ps(p + 8) : _mm256_maskload_ps(p + 8, first(std::max<int64_t>(n - 8, 0)));
    even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
    odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
  };
  const __m256i lane = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  for (int64_t ow = 0; ow < OW; ow += 8) {
    const int64_t k = std::min<int64_t>(8, OW - ow);  // outputs this step
    __m256 t[4];
    split(x0 + 2 * ow, 2 * k, t[0], t[1]);
    split(x1 + 2 * ow, 2 * k, t[2], t[3]);
    __m256 best = t[0];
    __m256i tap = _mm256_setzero_si256();
    for (int q = 1; q < 4; ++q) {
      const __m256 take = _mm256_or_ps(_mm256_cmp_ps(t[q], best, _CMP_GT_OQ), _mm256_cmp_ps(t[q], t[q], _CMP_UNORD_Q));
      best = _mm256_blendv_ps(best, t[q], take);
      tap = _mm256_blendv_epi8(tap, _mm256_set1_epi32(q), _mm256_castps_si256(take));
    }
    // flat position r0 + 2 ow + (tap & 1) + (tap >> 1) W, in int64
    const __m256i pos = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(_mm256_set1_epi32(int32_t(2 * ow)), lane),
                                                          _mm256_and_si256(tap, _mm256_set1_epi32(1))),
                                         _mm256_mullo_epi32(_mm256_srli_epi32(tap, 1), _mm256_set1_epi32(int32_t(W))));
    const __m256i base = _mm256_set1_epi64x(r0);
    const __m256i lo = _mm256_add_epi64(base, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(pos)));
    const __m256i hi = _mm256_add_epi64(base, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(pos, 1)));
    if (k == 8) {
      _mm256_storeu_ps(y + ow, best);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + ow), lo);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + ow + 4), hi);
    } else {
      const __m256i m = first(k);
      _mm256_maskstore_ps(y + ow, m, best);
      // the 64-bit lanes' masks: the 32-bit mask's lanes widened
      auto* out = reinterpret_cast<long long*>(idx + ow);
      _mm256_maskstore_epi64(out, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(m)), lo);
      _mm256_maskstore_epi64(out + 4, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(m, 1)), hi);
    }
  }
  return OW;
}

// y[oh, ow] = max over the window's taps inside the plane xp, idx = ih W + iw of the first maximum
// (pool::max_window); y and idx are the plane's [OH, OW] outputs.
template <typename T> void max_pool2d_plane(const T* xp, const pool::Geom& g, T* y, int64_t* idx) {
  using A = acc_t<T>;
  if (g.KH == 2 && g.KW == 2 && g.PH == 0 && g.PW == 0 && g.DH == 1 && g.DW == 1) {
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const int64_t o = oh * g.OW, r0 = oh * g.SH * g.W;
      int64_t done = 0;
      if (g.SW == 2 && g.W < (int64_t(1) << 30)) done = max_pool_row_2x2_s2(xp, r0, g.W, g.OW, y + o, idx + o);
      if (done < g.OW) max_pool_row_2x2(xp, r0 + done * g.SW, g.W, g.SW, g.OW - done, y + o + done, idx + o + done);
    }
    return;
  }
  for (int64_t oh = 0; oh < g.OH; ++oh)
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const int64_t o = oh * g.OW + ow;
      y[o] = T(pool::max_window<A>(xp, g, oh, ow, idx + o));
    }
}

}  // namespace tr::cpu
