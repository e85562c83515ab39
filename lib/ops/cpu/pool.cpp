// CPU pooling kernels: max_pool2d (values + flat argmax) and max_pool2d_backward, avg_pool2d and
// its adjoint avg_pool2d_backward; plain window loops (2x2 max windows without padding have their
// own loop), parallel over the N*C planes.
#include <immintrin.h>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include "ops/cpu/loops.h"
#include "ops/ops.h"
#include "ops/pool_geom.h"
#include "ops/pool_math.h"
#include "ops/registry.h"

namespace tr::cpu {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

using pool::Geom;

// f(plane) for each plane, split across the pool in chunks of about kGrain window taps.
template <typename F> void for_planes(const Geom& g, const F& f) {
  int64_t per = std::max<int64_t>(1, g.OH * g.OW * g.KH * g.KW);
  parallel_for(g.planes, std::max<int64_t>(1, kGrain / per), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) f(p);
  });
}

// One output row of 2x2 windows inside the plane x (no padding or dilation), rows r0 / W and the
// next: y[ow] = the max of x[r0 + ow SW + {0, 1, W, W + 1}] and idx[ow] its flat position; the
// first maximum, a NaN replacing any number (the general loop's rule). Branch-free selects over
// chunks of kPoolChunk outputs with a fixed trip count: rows are short (OW = 14 or 7 in a 28x28 CNN),
// and a variable-length vector loop would leave most outputs to its branchy scalar remainder.
constexpr int kPoolChunk = 16;
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
int64_t max_pool_row_2x2_s2(const float* x, int64_t r0, int64_t W, int64_t OW, float* y, int64_t* idx) {
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

// y[oh, ow] = max over the window's taps inside the plane, idx = ih W + iw of the first maximum
// (pool::max_window).
void max_pool2d_cpu(const Ins& in, Outs& out, const Attrs& a) {
  Tensor x = in[0].contiguous();
  Geom g = pool_geom(x.sizes(), out[0].sizes(), a);
  int64_t* pi = out[1].data_ptr<int64_t>();
  TR_DISPATCH_FLOAT(x.dtype(), "max_pool2d", [&] {
    using A = acc_t<scalar_t>;
    const scalar_t* px = x.data_ptr<scalar_t>();
    scalar_t* py = out[0].data_ptr<scalar_t>();
    const bool window2x2 = g.KH == 2 && g.KW == 2 && g.PH == 0 && g.PW == 0 && g.DH == 1 && g.DW == 1;
    for_planes(g, [&](int64_t p) {
      const scalar_t* xp = px + p * g.H * g.W;
      if (window2x2) {
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t o = (p * g.OH + oh) * g.OW, r0 = oh * g.SH * g.W;
          int64_t done = 0;
          if (g.SW == 2 && g.W < (int64_t(1) << 30)) done = max_pool_row_2x2_s2(xp, r0, g.W, g.OW, py + o, pi + o);
          if (done < g.OW) max_pool_row_2x2(xp, r0 + done * g.SW, g.W, g.SW, g.OW - done, py + o + done, pi + o + done);
        }
        return;
      }
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t o = (p * g.OH + oh) * g.OW + ow;
          py[o] = scalar_t(pool::max_window<A>(xp, g, oh, ow, pi + o));
        }
    });
  });
}
TR_REGISTER_KERNEL(max_pool2d, CPU, max_pool2d_cpu);

// gx[p, idx[p, o]] += gy[p, o] for each plane p (gx assigned: zero first)
void max_pool2d_backward_cpu(const Ins& in, Outs& out, const Attrs& a) {
  Tensor gy = in[0].contiguous(), idx = in[1].contiguous();
  Geom g{out[0].size(0) * out[0].size(1), out[0].size(2), out[0].size(3), gy.size(2), gy.size(3), 1, 1, 1, 1, 0, 0};
  const int64_t HW = g.H * g.W, P = g.OH * g.OW;
  const int64_t* pi = idx.data_ptr<int64_t>();
  std::atomic<bool> bad{false};
  TR_DISPATCH_FLOAT(gy.dtype(), "max_pool2d_backward", [&] {
    using A = acc_t<scalar_t>;
    const scalar_t* pg = gy.data_ptr<scalar_t>();
    scalar_t* px = out[0].data_ptr<scalar_t>();
    parallel_for(g.planes, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, HW + P)), [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        scalar_t* xp = px + p * HW;
        std::fill(xp, xp + HW, scalar_t(0));
        const scalar_t* gp = pg + p * P;
        const int64_t* ip = pi + p * P;
        for (int64_t o = 0; o < P; ++o) {
          const int64_t i = ip[o];
          if (i < 0 || i >= HW) {
            bad = true;
            continue;
          }
          xp[i] = scalar_t(A(xp[i]) + A(gp[o]));
        }
      }
    });
  });
  TR_CHECK(!bad, "max_pool2d_backward: an index is outside the ", g.H, " x ", g.W, " input plane");
}
TR_REGISTER_KERNEL(max_pool2d_backward, CPU, max_pool2d_backward_cpu);

// y[oh, ow] = sum over the window of x / divisor
void avg_pool2d_cpu(const Ins& in, Outs& out, const Attrs& a) {
  Tensor x = in[0].contiguous();
  Geom g = pool_geom(x.sizes(), out[0].sizes(), a);
  bool cip = a.b("count_include_pad");
  TR_DISPATCH_FLOAT(x.dtype(), "avg_pool2d", [&] {
    using A = acc_t<scalar_t>;
    const scalar_t* px = x.data_ptr<scalar_t>();
    scalar_t* py = out[0].data_ptr<scalar_t>();
    for_planes(g, [&](int64_t p) {
      const scalar_t* xp = px + p * g.H * g.W;
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow)
          py[(p * g.OH + oh) * g.OW + ow] = scalar_t(pool::avg_at<A>(xp, g, oh, ow, cip));
    });
  });
}
TR_REGISTER_KERNEL(avg_pool2d, CPU, avg_pool2d_cpu);

// gx[ih, iw] = sum over the windows containing (ih, iw) of gy[oh, ow] / divisor (gx assigned)
void avg_pool2d_backward_cpu(const Ins& in, Outs& out, const Attrs& a) {
  Tensor gy = in[0].contiguous();
  Geom g = pool_geom(out[0].sizes(), gy.sizes(), a);
  bool cip = a.b("count_include_pad");
  TR_DISPATCH_FLOAT(gy.dtype(), "avg_pool2d_backward", [&] {
    using A = acc_t<scalar_t>;
    const scalar_t* py = gy.data_ptr<scalar_t>();
    scalar_t* px = out[0].data_ptr<scalar_t>();
    for_planes(g, [&](int64_t p) {
      std::vector<A> acc(size_t(g.H * g.W), A(0));
      const scalar_t* yp = py + p * g.OH * g.OW;
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          pool::AvgWindow win = pool::avg_window(g, oh, ow, cip);
          A v = A(yp[oh * g.OW + ow]) / A(win.div);
          for (int64_t ih = win.h0; ih < win.h1; ++ih)
            for (int64_t iw = win.w0; iw < win.w1; ++iw) acc[size_t(ih * g.W + iw)] += v;
        }
      scalar_t* xp = px + p * g.H * g.W;
      for (int64_t k = 0; k < g.H * g.W; ++k) xp[k] = scalar_t(acc[size_t(k)]);
    });
  });
}
TR_REGISTER_KERNEL(avg_pool2d_backward, CPU, avg_pool2d_backward_cpu);

}  // namespace
}  // namespace tr::cpu
