// CPU kernels of the fused batch norm + relu + max pool (ops/batch_norm_relu_pool.cpp). Each thread
// owns a block of channels, as the batch-norm kernels, and takes their statistics and row sums
// (ops/cpu/batch_norm_rows.h) and max_pool2d's plane loop (ops/cpu/max_pool_plane.h) in the same
// order, so the results are the chain's bit for bit. What the fusion saves is memory traffic: a
// plane is normalised into an L1-resident scratch buffer and pooled from there (the chain writes and
// reads the normalised and the relu'd activations in full), and the backward builds each plane's
// gradient below the pool and the relu straight into gx's plane, sums it, and finishes gx there in
// place (the chain writes max_pool2d_backward's output and threshold_backward's, and reads them
// again).
#include <immintrin.h>
#include <atomic>
#include <vector>
#include "ops/cpu/batch_norm_rows.h"
#include "ops/cpu/max_pool_plane.h"
#include "ops/ops.h"
#include "ops/pool_geom.h"
#include "ops/registry.h"
#include "ops/scalar_math.h"

namespace tr::cpu {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;
using namespace bn_rows;

// y = relu(x alpha + beta) over a row, the affine rounded to T first (as batch_norm's output is)
template <typename T, typename A> void row_affine_relu(const T* x, T* y, int64_t L, A alpha, A beta) {
#pragma omp simd
  for (int64_t l = 0; l < L; ++l) y[l] = T(math::relu(A(T(bn::affine(A(x[l]), alpha, beta)))));
}

// The gradient below the pool and the relu of one plane (HW values): zero, then g[idx[o]] += gy[o]
// for each output o whose value y[o] passed the relu (y[o] > 0: threshold_backward's rule at the
// argmax, whose relu output y[o] is). The others add into a spare value instead: the relu's mask
// is a coin toss that a branch would mispredict half the time. The sums are the chain's: +0, then
// the same gy[o] in the same order where the mask passes, +0 where it does not. Returns false when
// an index is outside the plane.
template <typename T> bool masked_plane_grad(const T* gy, const T* y, const int64_t* idx, int64_t P, T* g, int64_t HW) {
  using A = acc_t<T>;
  std::fill(g, g + HW, T(0));
  T spare(0);
  bool ok = true;
  for (int64_t o = 0; o < P; ++o) {
    const int64_t i = idx[o];
    const bool inside = uint64_t(i) < uint64_t(HW);
    ok &= inside;
    T* at = inside & (A(y[o]) > A(0)) ? g + i : &spare;
    *at = T(A(*at) + A(gy[o]));
  }
  return ok;
}

// Other dtypes: the scatter.
template <typename T> bool masked_plane_grad_2x2_s2(const T* gy, const T* y, const int64_t* idx, T* g, int64_t H,
                                                    int64_t W, int64_t OH, int64_t OW) {
  return masked_plane_grad(gy, y, idx, OH * OW, g, H * W);
}
// masked_plane_grad for f32 and 2x2 windows of stride 2 without padding: each position lies in one
// window at most, so the plane is written in order instead of scattered, 8 windows a step: the
// window's gradient (+0 + gy, the chain's sum: a -0 becomes +0) at the tap idx names, +0 at its
// other three taps and at the positions no window covers (the last row or column of an odd H or W).
// Indices must fit in 32 bits (the caller checks H W).
bool masked_plane_grad_2x2_s2(const float* gy, const float* y, const int64_t* idx, float* g, int64_t H, int64_t W,
                              int64_t OH, int64_t OW) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256i lane8 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i even_lanes = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256i twice_lane = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  auto first = [&](int64_t n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(n)), lane8); };  // lanes < n
  // the 4 int64 at p (the first n of them, the rest 0): their low halves in lanes 0-3 of lo32, their
  // high halves (0 for an index inside the plane) in lanes 0-3 of hi32
  auto idx_halves = [&](const int64_t* p, int64_t n, __m256i& lo32, __m256i& hi32) {
    const __m256i m =
        _mm256_cvtepi32_epi64(_mm_set_epi32(n > 3 ? -1 : 0, n > 2 ? -1 : 0, n > 1 ? -1 : 0, n > 0 ? -1 : 0));
    const __m256i v = _mm256_permutevar8x32_epi32(_mm256_maskload_epi64(reinterpret_cast<const long long*>(p), m),
                                                  even_lanes);  // low halves, then high
    lo32 = v;
    hi32 = _mm256_permute4x64_epi64(v, 0xEE);
  };
  // 2k floats of the two taps' planes e (even columns) and o (odd) interleaved at dst
  auto store_pairs = [&](float* dst, __m256 e, __m256 o, int64_t k) {
    const __m256 a = _mm256_unpacklo_ps(e, o), b = _mm256_unpackhi_ps(e, o);
    const __m256 lo = _mm256_permute2f128_ps(a, b, 0x20), hi = _mm256_permute2f128_ps(a, b, 0x31);
    if (k == 8) {
      _mm256_storeu_ps(dst, lo);
      _mm256_storeu_ps(dst + 8, hi);
    } else {
      _mm256_maskstore_ps(dst, first(std::min<int64_t>(2 * k, 8)), lo);
      _mm256_maskstore_ps(dst + 8, first(std::max<int64_t>(2 * k - 8, 0)), hi);
    }
  };
  __m256i bad = _mm256_setzero_si256();
  const __m256i w1 = _mm256_set1_epi32(1), wW = _mm256_set1_epi32(int32_t(W)), wW1 = _mm256_set1_epi32(int32_t(W + 1));
  for (int64_t oh = 0; oh < OH; ++oh) {
    float *row0 = g + 2 * oh * W, *row1 = row0 + W;
    for (int64_t ow = 0; ow < OW; ow += 8) {
      const int64_t k = std::min<int64_t>(8, OW - ow), o = oh * OW + ow;
      const __m256i m = first(k);
      const __m256 yv = _mm256_maskload_ps(y + o, m), gv = _mm256_maskload_ps(gy + o, m);
      const __m256 v = _mm256_and_ps(_mm256_add_ps(zero, gv), _mm256_cmp_ps(yv, zero, _CMP_GT_OQ));
      __m256i lo_a, hi_a, lo_b, hi_b;
      idx_halves(idx + o, k, lo_a, hi_a);
      idx_halves(idx + o + 4, k - 4, lo_b, hi_b);
      const __m256i idx32 = _mm256_permute2x128_si256(lo_a, lo_b, 0x20);
      const __m256i high = _mm256_permute2x128_si256(hi_a, hi_b, 0x20);
      // the tap: idx - (2 oh W + 2 (ow + lane)) in {0, 1, W, W + 1}
      const __m256i rel =
          _mm256_sub_epi32(idx32, _mm256_add_epi32(_mm256_set1_epi32(int32_t(2 * oh * W + 2 * ow)), twice_lane));
      const __m256i t00 = _mm256_cmpeq_epi32(rel, _mm256_setzero_si256()), t01 = _mm256_cmpeq_epi32(rel, w1),
                    t10 = _mm256_cmpeq_epi32(rel, wW), t11 = _mm256_cmpeq_epi32(rel, wW1);
      const __m256i hit = _mm256_or_si256(_mm256_or_si256(t00, t01), _mm256_or_si256(t10, t11));
      bad = _mm256_or_si256(bad, _mm256_and_si256(m, _mm256_or_si256(_mm256_andnot_si256(hit, m), high)));
      store_pairs(row0 + 2 * ow, _mm256_and_ps(v, _mm256_castsi256_ps(t00)), _mm256_and_ps(v, _mm256_castsi256_ps(t01)),
                  k);
      store_pairs(row1 + 2 * ow, _mm256_and_ps(v, _mm256_castsi256_ps(t10)), _mm256_and_ps(v, _mm256_castsi256_ps(t11)),
                  k);
    }
    for (int64_t iw = 2 * OW; iw < W; ++iw) row0[iw] = row1[iw] = 0.0f;
  }
  std::fill(g + 2 * OH * W, g + H * W, 0.0f);
  return _mm256_testz_si256(bad, bad);
}

// make(n, c, k) then use(n, c, k) for the planes (n, c) of the channels [c0, c1), sample by sample
// (k counts them), each plane made one plane ahead of its use: loads of a plane just written would
// straddle its vector (and masked) stores still in the store buffer, which cannot forward to them,
// and wait for each to retire.
template <typename Make, typename Use>
void made_ahead(const NCL& g, int64_t c0, int64_t c1, const Make& make, const Use& use) {
  int64_t k = 0, pn = 0, pc = 0;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t c = c0; c < c1; ++c, ++k) {
      make(n, c, k);
      if (k > 0) use(pn, pc, k - 1);
      pn = n;
      pc = c;
    }
  if (k > 0) use(pn, pc, k - 1);
}

// y, idx = max_pool2d(relu(batch_norm(x))), mean and var the batch statistics
void batch_norm_relu_max_pool2d_cpu(const Ins& in, Outs& out, const Attrs& a) {
  const Tensor x = in[0].contiguous(), w = in[1].contiguous(), b = in[2].contiguous();
  const NCL g = ncl_of(x.sizes());
  const pool::Geom pg = pool_geom(x.sizes(), out[0].sizes(), a);
  const int64_t P = pg.OH * pg.OW;
  const double eps = a.f("eps");
  int64_t* pi = out[1].data_ptr<int64_t>();
  TR_DISPATCH_FLOAT(x.dtype(), "batch_norm_relu_max_pool2d", [&] {
    using T = scalar_t;
    using A = acc_t<T>;
    const T* px = x.data_ptr<T>();
    T* py = out[0].data_ptr<T>();
    for_channel_blocks(g, [&](int64_t c0, int64_t c1) {
      std::vector<double> alpha, beta;
      channel_statistics(px, w.data_ptr<T>(), b.data_ptr<T>(), out[2].data_ptr<T>(), out[3].data_ptr<T>(), g, c0, c1,
                         eps, alpha, beta);
      std::vector<T> planes(2 * size_t(g.L));  // plane k in planes[k % 2]
      auto plane = [&](int64_t k) { return planes.data() + size_t(k & 1) * size_t(g.L); };
      made_ahead(
          g, c0, c1,
          [&](int64_t n, int64_t c, int64_t k) {
            const size_t i = size_t(c - c0);
            row_affine_relu(px + g.row(n, c), plane(k), g.L, A(alpha[i]), A(beta[i]));
          },
          [&](int64_t n, int64_t c, int64_t k) {
            const int64_t o = (n * g.C + c) * P;
            max_pool2d_plane(plane(k), pg, py + o, pi + o);
          });
    });
  });
}
TR_REGISTER_KERNEL(batch_norm_relu_max_pool2d, CPU, batch_norm_relu_max_pool2d_cpu);

// gx, gw, gb: batch_norm_backward of the gradient below the pool and the relu, built per plane
void batch_norm_relu_max_pool2d_backward_cpu(const Ins& in, Outs& out, const Attrs& a) {
  const Tensor gy = in[0].contiguous(), x = in[1].contiguous(), w = in[2].contiguous(), m = in[3].contiguous(),
               v = in[4].contiguous(), y = in[5].contiguous(), idx = in[6].contiguous();
  const NCL g = ncl_of(x.sizes());
  const int64_t P = gy.size(2) * gy.size(3);
  const double eps = a.f("eps");
  const int64_t* pi = idx.data_ptr<int64_t>();
  const pool::Geom pg = pool_geom(x.sizes(), gy.sizes(), a);
  const bool window2x2_s2 = pg.KH == 2 && pg.KW == 2 && pg.SH == 2 && pg.SW == 2 && pg.PH == 0 && pg.PW == 0 &&
                            pg.DH == 1 && pg.DW == 1 && g.L < (int64_t(1) << 30);
  std::atomic<bool> bad{false};
  TR_DISPATCH_FLOAT(x.dtype(), "batch_norm_relu_max_pool2d_backward", [&] {
    using T = scalar_t;
    const T *pgy = gy.data_ptr<T>(), *px = x.data_ptr<T>(), *py = y.data_ptr<T>(), *pm = m.data_ptr<T>();
    T* pgx = out[0].data_ptr<T>();
    for_channel_blocks(g, [&](int64_t c0, int64_t c1) {
      const size_t nc = size_t(c1 - c0);
      // the gradient below the pool and the relu, built into gx's plane, then gx from it in place
      auto plane_grad = [&](int64_t n, int64_t c, int64_t) {
        const int64_t o = (n * g.C + c) * P;
        T* plane = pgx + g.row(n, c);
        const bool ok = window2x2_s2
                            ? masked_plane_grad_2x2_s2(pgy + o, py + o, pi + o, plane, pg.H, pg.W, pg.OH, pg.OW)
                            : masked_plane_grad(pgy + o, py + o, pi + o, P, plane, g.L);
        if (!ok) bad = true;
      };
      std::vector<double> s_g(nc, 0.0), s_gxmu(nc, 0.0);
      made_ahead(g, c0, c1, plane_grad, [&](int64_t n, int64_t c, int64_t) {
        row_grad_sums(pgx + g.row(n, c), px + g.row(n, c), g.L, at(pm, c), s_g[size_t(c - c0)], s_gxmu[size_t(c - c0)]);
      });
      const GradRowCoefficients<T> q =
          grad_row_coefficients(s_g, s_gxmu, w.data_ptr<T>(), pm, v.data_ptr<T>(), out[1].data_ptr<T>(),
                                out[2].data_ptr<T>(), g, c0, c1, eps);
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t c = c0; c < c1; ++c) {
          const size_t i = size_t(c - c0);
          T* gx = pgx + g.row(n, c);
          row_grad_input(gx, px + g.row(n, c), gx, g.L, q.k[i], q.grad_mean[i], q.mean[i], q.scale[i]);
        }
    });
  });
  TR_CHECK(!bad, "batch_norm_relu_max_pool2d_backward: an index is outside the ", x.size(2), " x ", x.size(3),
           " input plane", window2x2_s2 ? " or its window" : "");
}
TR_REGISTER_KERNEL(batch_norm_relu_max_pool2d_backward, CPU, batch_norm_relu_max_pool2d_backward_cpu);

}  // namespace
}  // namespace tr::cpu
