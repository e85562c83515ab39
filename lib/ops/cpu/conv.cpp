// CPU convolution kernels: f32 through oneDNN's JIT convolutions where it has them
// (ops/cpu/onednn_conv.h), else im2col + BLAS gemm per sample and group, split over the batch or
// over blocks of rows / channels (f32/f64; f16/bf16 through f32), and the plain loops conv2d_*_naive
// that define what the fast kernels compute (tests/unit/test_conv_pool.cpp checks one against the other).
#include <cblas.h>  // cblas_dgemm (OpenBLAS, OpenMP build)
#include <algorithm>
#include <cstring>
#include "ops/cpu/conv_geom.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/onednn.h"
#include "ops/cpu/onednn_conv.h"
#include "ops/cpu/sgemm.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::cpu {

namespace {

ConvGeom conv_geom(const Shape& x, const Shape& w, const Shape& y, const Attrs& a) {
  const Pair &s = a.ints("stride"), &p = a.ints("padding"), &d = a.ints("dilation");
  return {x[0], x[1], x[2], x[3], w[0], w[2], w[3], y[2], y[3], s[0], s[1], p[0], p[1], d[0], d[1], a.i("groups")};
}

// ---- naive reference: plain loops in double, one output element at a time ----

// f(n, o, oh, ow, c, i, j, ih, iw) for every (output, tap) pair that reads a real input element;
// c is the input channel (absolute), (c - g Cg) the weight's channel.
template <typename F> void for_each_tap(const ConvGeom& g, const F& f) {
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o) {
      int64_t grp = o / g.Og();
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow)
          for (int64_t cc = 0; cc < g.Cg(); ++cc)
            for (int64_t i = 0; i < g.KH; ++i)
              for (int64_t j = 0; j < g.KW; ++j) {
                int64_t ih = oh * g.SH - g.PH + i * g.DH, iw = ow * g.SW - g.PW + j * g.DW;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                f(n, o, oh, ow, grp * g.Cg() + cc, cc, i, j, ih, iw);
              }
    }
}

std::vector<double> as_doubles(const Tensor& t) { return t.contiguous().tolist(); }

void store(const std::vector<double>& v, const Tensor& out) {
  out.detach().copy_(from_vector(v, out.sizes(), TensorOptions(DType::F64)));
}

}  // namespace

// y[n, o, oh, ow] = sum_{c in group(o), i, j} x[n, c, oh SH - PH + i DH, ow SW - PW + j DW] w[o, c - g Cg, i, j]
void conv2d_forward_naive(const Tensor& x, const Tensor& w, const Tensor& y, const Attrs& a) {
  ConvGeom g = conv_geom(x.sizes(), w.sizes(), y.sizes(), a);
  auto px = as_doubles(x), pw = as_doubles(w);
  std::vector<double> py(size_t(y.numel()), 0.0);
  for_each_tap(g, [&](int64_t n, int64_t o, int64_t oh, int64_t ow, int64_t c, int64_t cc, int64_t i, int64_t j,
                      int64_t ih, int64_t iw) {
    py[size_t(((n * g.O + o) * g.OH + oh) * g.OW + ow)] +=
        px[size_t(((n * g.C + c) * g.H + ih) * g.W + iw)] * pw[size_t(((o * g.Cg() + cc) * g.KH + i) * g.KW + j)];
  });
  store(py, y);
}

// gx[n, c, ih, iw] = sum over the taps that read x[n, c, ih, iw] of gy[n, o, oh, ow] w[o, c - g Cg, i, j]
void conv2d_backward_input_naive(const Tensor& gy, const Tensor& w, const Tensor& gx, const Attrs& a) {
  ConvGeom g = conv_geom(gx.sizes(), w.sizes(), gy.sizes(), a);
  auto py = as_doubles(gy), pw = as_doubles(w);
  std::vector<double> px(size_t(gx.numel()), 0.0);
  for_each_tap(g, [&](int64_t n, int64_t o, int64_t oh, int64_t ow, int64_t c, int64_t cc, int64_t i, int64_t j,
                      int64_t ih, int64_t iw) {
    px[size_t(((n * g.C + c) * g.H + ih) * g.W + iw)] +=
        py[size_t(((n * g.O + o) * g.OH + oh) * g.OW + ow)] * pw[size_t(((o * g.Cg() + cc) * g.KH + i) * g.KW + j)];
  });
  store(px, gx);
}

// gw[o, cc, i, j] = sum_{n, oh, ow} gy[n, o, oh, ow] x[n, g Cg + cc, oh SH - PH + i DH, ow SW - PW + j DW]
void conv2d_backward_weight_naive(const Tensor& gy, const Tensor& x, const Tensor& gw, const Attrs& a) {
  ConvGeom g = conv_geom(x.sizes(), gw.sizes(), gy.sizes(), a);
  auto py = as_doubles(gy), px = as_doubles(x);
  std::vector<double> pw(size_t(gw.numel()), 0.0);
  for_each_tap(g, [&](int64_t n, int64_t o, int64_t oh, int64_t ow, int64_t c, int64_t cc, int64_t i, int64_t j,
                      int64_t ih, int64_t iw) {
    pw[size_t(((o * g.Cg() + cc) * g.KH + i) * g.KW + j)] +=
        py[size_t(((n * g.O + o) * g.OH + oh) * g.OW + ow)] * px[size_t(((n * g.C + c) * g.H + ih) * g.W + iw)];
  });
  store(pw, gw);
}

// ---- fast kernels ----

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

// C[M,N] = alpha op(A) op(B) + beta C, row-major.
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
          float beta, float* C, int64_t ldc) {
  sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B, int64_t ldb,
          double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              1.0, A, int(lda), B, int(ldb), beta, C, int(ldc));
}

// Range [lo, hi) of output columns ow whose input column ow*S + off lies in [0, W).
inline void valid_range(int64_t off, int64_t S, int64_t W, int64_t OW, int64_t& lo, int64_t& hi) {
  lo = off >= 0 ? 0 : std::min(OW, (-off + S - 1) / S);
  hi = W - 1 - off >= 0 ? std::min(OW, (W - 1 - off) / S + 1) : 0;
  hi = std::max(hi, lo);
}

// col[(c KH + i) KW + j, (oh - oh0) OW + ow] = x[c, oh SH - PH + i DH, ow SW - PW + j DW] (0 outside)
// for the nc channels of x [nc, H, W] and output rows oh in [oh0, oh1); col is [nc KH KW, (oh1 - oh0) OW].
// With padding, the planes are first copied into `pad` with zero borders, so every row of col is a
// plain strided read (rows are short, e.g. OW = 14: bounds checks and memset calls per row cost
// more than the copy).
// `ld` (default PB): the distance between col's rows, for writing one sample's columns into a
// matrix that holds several samples side by side.
template <typename T> void im2col(const T* x, int64_t nc, int64_t oh0, int64_t oh1, const ConvGeom& g, T* col,
                                  std::vector<T>& pad, int64_t ld = -1) {
  const int64_t OW = g.OW, PB = ld < 0 ? (oh1 - oh0) * OW : ld;
  const int64_t Hp = g.H + 2 * g.PH, Wp = g.W + 2 * g.PW;
  const T* src = x;
  if (g.PH != 0 || g.PW != 0) {
    pad.assign(size_t(nc * Hp * Wp), T(0));
    for (int64_t c = 0; c < nc; ++c)
      for (int64_t h = 0; h < g.H; ++h) {
        const T* xr = x + (c * g.H + h) * g.W;
        T* pr = pad.data() + (c * Hp + h + g.PH) * Wp + g.PW;
#pragma omp simd
        for (int64_t w = 0; w < g.W; ++w) pr[w] = xr[w];
      }
    src = pad.data();
  }
  for (int64_t c = 0; c < nc; ++c)
    for (int64_t i = 0; i < g.KH; ++i)
      for (int64_t j = 0; j < g.KW; ++j) {
        T* row = col + ((c * g.KH + i) * g.KW + j) * PB;
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          T* r = row + (oh - oh0) * OW;
          const T* pr = src + (c * Hp + oh * g.SH + i * g.DH) * Wp + j * g.DW;  // padded coordinates
          if (g.SW == 1) {
#pragma omp simd
            for (int64_t ow = 0; ow < OW; ++ow) r[ow] = pr[ow];
          } else {
            for (int64_t ow = 0; ow < OW; ++ow) r[ow] = pr[ow * g.SW];
          }
        }
      }
}

// The adjoint of im2col over all output rows: x[c, ih, iw] += col[...] for every column entry
// that reads (ih, iw); x is [nc, H, W], col is [nc KH KW, P].
// `ld` (default P): the distance between col's rows, as for im2col.
template <typename T> void col2im(const T* col, int64_t nc, const ConvGeom& g, T* x, int64_t ld = -1) {
  const int64_t OH = g.OH, OW = g.OW, L = ld < 0 ? OH * OW : ld;
  for (int64_t c = 0; c < nc; ++c)
    for (int64_t i = 0; i < g.KH; ++i)
      for (int64_t j = 0; j < g.KW; ++j) {
        const T* row = col + ((c * g.KH + i) * g.KW + j) * L;
        T* xc = x + c * g.H * g.W;
        int64_t off = j * g.DW - g.PW, lo, hi;
        valid_range(off, g.SW, g.W, OW, lo, hi);
        for (int64_t oh = 0; oh < OH; ++oh) {
          int64_t ih = oh * g.SH - g.PH + i * g.DH;
          if (ih < 0 || ih >= g.H) continue;
          const T* r = row + oh * OW;
          T* xr = xc + ih * g.W + off;
          if (g.SW == 1)
            for (int64_t ow = lo; ow < hi; ++ow) xr[ow] += r[ow];
          else
            for (int64_t ow = lo; ow < hi; ++ow) xr[ow * g.SW] += r[ow];
        }
      }
}

// Work is cut into tasks (sample x block) and split across the OpenMP pool with parallel_for;
// BLAS then runs single-threaded inside each thread. The per-sample gemms are small (e.g.
// 64 x 288 x 196): OpenBLAS's own threading of them measured slower than one thread, by far so
// on a loaded machine, so a small batch is cut into blocks rather than left to BLAS threads.
int num_threads() { return omp_in_parallel() ? 1 : omp_get_max_threads(); }
// Blocks per unit so that units * blocks covers the threads (at most max_blocks).
int64_t blocks_for(int64_t units, int64_t max_blocks) {
  int64_t nt = num_threads();
  return std::clamp<int64_t>((nt + std::max<int64_t>(units, 1) - 1) / std::max<int64_t>(units, 1), 1,
                             std::max<int64_t>(max_blocks, 1));
}
// Tasks per parallel_for chunk: about 2^18 flops at least.
int64_t grain_for(double task_flops) {
  return std::max<int64_t>(1, int64_t(double(1 << 18) / std::max(task_flops, 1.0)));
}

// Samples whose columns share one gemm in the forward and the input gradient: small feature maps (a 7 x 7 map gives a
// [O, K] x [K, 49] product per sample, which OpenBLAS runs at 2/3 of the rate it reaches with a
// few hundred columns) are batched to about kBatchColumns columns. Depends on the geometry only,
// never on the thread count, so results do not either.
constexpr int64_t kBatchColumns = 512;
int64_t sample_batch(const ConvGeom& g) {
  if (g.G != 1 || g.direct() || g.N < 2) return 1;
  return std::clamp<int64_t>(kBatchColumns / std::max<int64_t>(g.P(), 1), 1, g.N);
}

// y[n0 .. n0 + S) [O, P] from one gemm: w [O, K] x [col(x[n0]) | col(x[n0 + 1]) | ...] [K, S P]
// into a [O, S P] buffer (rows preset to the bias), then each sample's P columns copied out.
template <typename T>
void conv2d_forward_batched(const T* x, const T* w, const T* bias, T* y, const ConvGeom& g, int64_t S) {
  const int64_t K = g.K(), P = g.P(), HW = g.H * g.W, O = g.O, chunks = (g.N + S - 1) / S;
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    std::vector<T> col(size_t(K * S * P)), out(size_t(O * S * P)), pad;
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t n0 = c * S, ns = std::min(S, g.N - n0), L = ns * P;
      for (int64_t s = 0; s < ns; ++s) im2col(x + (n0 + s) * g.C * HW, g.C, 0, g.OH, g, col.data() + s * P, pad, L);
      if (bias)
        for (int64_t o = 0; o < O; ++o) std::fill(out.data() + o * L, out.data() + (o + 1) * L, bias[o]);
      gemm(false, false, O, L, K, w, K, col.data(), L, bias ? T(1) : T(0), out.data(), L);
      for (int64_t s = 0; s < ns; ++s)
        for (int64_t o = 0; o < O; ++o)
          std::memcpy(y + ((n0 + s) * O + o) * P, out.data() + o * L + s * P, size_t(P) * sizeof(T));
    }
  });
}

// y[n, g] [Og, P] = w_g [Og, K] col(x[n, g]) [K, P] (+ bias[o] on row o: the gemm accumulates onto
// rows preset to the bias, while they are in cache); tasks: (sample, block of output rows).
template <typename T> void conv2d_forward_fast(const T* x, const T* w, const T* bias, T* y, const ConvGeom& g) {
  const int64_t K = g.K(), P = g.P(), Cg = g.Cg(), Og = g.Og(), HW = g.H * g.W, OW = g.OW;
  if (K == 0) {  // no input channels: an empty sum
    for (int64_t i = 0; i < g.N * g.O; ++i) std::fill(y + i * P, y + (i + 1) * P, bias ? bias[i % g.O] : T(0));
    return;
  }
  if (const int64_t S = sample_batch(g); S > 1) return conv2d_forward_batched(x, w, bias, y, g, S);
  const int64_t nb = blocks_for(g.N, g.OH);
  const double task_flops = 2.0 * double(g.O) * double(K) * double(P) / double(nb);
  parallel_for(g.N * nb, grain_for(task_flops), [&](int64_t t0, int64_t t1) {
    std::vector<T> col(g.direct() ? 0 : size_t(K * ((g.OH + nb - 1) / nb) * OW)), pad;
    for (int64_t t = t0; t < t1; ++t) {
      int64_t n = t / nb, b = t % nb;
      int64_t oh0 = g.OH * b / nb, oh1 = g.OH * (b + 1) / nb, PB = (oh1 - oh0) * OW;
      if (PB == 0) continue;
      for (int64_t gi = 0; gi < g.G; ++gi) {
        const T* xg = x + (n * g.C + gi * Cg) * HW;
        const T* src = xg + oh0 * OW;  // direct: x rows are output rows
        int64_t ldb = P;
        if (!g.direct()) {
          im2col(xg, Cg, oh0, oh1, g, col.data(), pad);
          src = col.data();
          ldb = PB;
        }
        T* dst = y + (n * g.O + gi * Og) * P + oh0 * OW;
        if (bias)
          for (int64_t o = 0; o < Og; ++o) std::fill(dst + o * P, dst + o * P + PB, bias[gi * Og + o]);
        gemm(false, false, Og, PB, K, w + gi * Og * K, K, src, ldb, bias ? T(1) : T(0), dst, P);
      }
    }
  });
}

// gx[n0 .. n0 + S) from one gemm, the forward's batching transposed: the samples' gy [O, P] side by
// side as [O, S P], w^T [K, O] times it gives their column matrices [K, S P], each folded back
// by col2im into its own sample.
template <typename T> void conv2d_backward_input_batched(const T* gy, const T* w, T* gx, const ConvGeom& g, int64_t S) {
  const int64_t K = g.K(), P = g.P(), HW = g.H * g.W, O = g.O, chunks = (g.N + S - 1) / S;
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    std::vector<T> col(size_t(K * S * P)), in(size_t(O * S * P));
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t n0 = c * S, ns = std::min(S, g.N - n0), L = ns * P;
      for (int64_t s = 0; s < ns; ++s)
        for (int64_t o = 0; o < O; ++o)
          std::memcpy(in.data() + o * L + s * P, gy + ((n0 + s) * O + o) * P, size_t(P) * sizeof(T));
      gemm(true, false, K, L, O, w, K, in.data(), L, T(0), col.data(), L);
      for (int64_t s = 0; s < ns; ++s) {
        T* dst = gx + (n0 + s) * g.C * HW;
        std::fill(dst, dst + g.C * HW, T(0));
        col2im(col.data() + s * P, g.C, g, dst, L);
      }
    }
  });
}

// gx[n, g] = col2im(w_g^T [K, Og] gy[n, g] [Og, P]); tasks: (sample, group, block of input
// channels), each writing only its own channels of gx (rows c KH KW .. of the column matrix).
template <typename T> void conv2d_backward_input_fast(const T* gy, const T* w, T* gx, const ConvGeom& g) {
  const int64_t K = g.K(), P = g.P(), Cg = g.Cg(), Og = g.Og(), HW = g.H * g.W, KK = g.KH * g.KW;
  if (Og == 0 || K == 0) {  // no output channels: an empty sum
    std::fill(gx, gx + g.N * g.C * HW, T(0));
    return;
  }
  if (const int64_t S = sample_batch(g); S > 1) return conv2d_backward_input_batched(gy, w, gx, g, S);
  const int64_t nb = blocks_for(g.N * g.G, Cg);
  const double task_flops = 2.0 * double(Og) * double(K) * double(P) / double(nb);
  parallel_for(g.N * g.G * nb, grain_for(task_flops), [&](int64_t t0, int64_t t1) {
    std::vector<T> col(g.direct() ? 0 : size_t((Cg + nb - 1) / nb * KK * P));
    for (int64_t t = t0; t < t1; ++t) {
      int64_t n = t / (g.G * nb), gi = t / nb % g.G, b = t % nb;
      int64_t c0 = Cg * b / nb, c1 = Cg * (b + 1) / nb, kb = (c1 - c0) * KK;
      if (kb == 0) continue;
      T* dst = gx + (n * g.C + gi * Cg + c0) * HW;
      const T* src = gy + (n * g.O + gi * Og) * P;
      const T* wk = w + gi * Og * K + c0 * KK;  // w_g[:, k0:k0+kb], read transposed
      if (g.direct()) {
        gemm(true, false, kb, P, Og, wk, K, src, P, T(0), dst, P);
      } else {
        gemm(true, false, kb, P, Og, wk, K, src, P, T(0), col.data(), P);
        std::fill(dst, dst + (c1 - c0) * HW, T(0));
        col2im(col.data(), c1 - c0, g, dst);
      }
    }
  });
}

// gw_g [Og, K] = sum_n gy[n, g] [Og, P] col(x[n, g])^T [P, K]. Deterministic either way:
// a batch that fills the pool is cut into one contiguous range per thread, each summed into its
// own buffer, and the buffers are added in range order; otherwise the tasks are (group, block of
// input channels), each owning its columns of gw and summing over the batch in order.
template <typename T> void conv2d_backward_weight_fast(const T* gy, const T* x, T* gw, const ConvGeom& g) {
  const int64_t K = g.K(), P = g.P(), Cg = g.Cg(), Og = g.Og(), HW = g.H * g.W, WN = g.O * K, KK = g.KH * g.KW;
  if (WN == 0) return;
  std::fill(gw, gw + WN, T(0));
  const int64_t nt = num_threads();
  const double flops = 2.0 * double(g.N) * double(WN) * double(P);
  if (nt > 1 && g.N >= nt && flops >= double(1 << 20)) {
    const int64_t parts = nt;
    std::vector<std::vector<T>> partial(size_t(parts - 1), std::vector<T>(size_t(WN), T(0)));
    parallel_for(parts, 1, [&](int64_t p0, int64_t p1) {
      std::vector<T> col(g.direct() ? 0 : size_t(K * P)), pad;
      for (int64_t part = p0; part < p1; ++part) {
        T* acc = part == 0 ? gw : partial[size_t(part - 1)].data();
        for (int64_t n = g.N * part / parts; n < g.N * (part + 1) / parts; ++n)
          for (int64_t gi = 0; gi < g.G; ++gi) {
            const T* src = x + (n * g.C + gi * Cg) * HW;
            if (!g.direct()) {
              im2col(src, Cg, 0, g.OH, g, col.data(), pad);
              src = col.data();
            }
            gemm(false, true, Og, K, P, gy + (n * g.O + gi * Og) * P, P, src, P, T(1), acc + gi * Og * K, K);
          }
      }
    });
    for (int64_t part = 1; part < parts; ++part) {
      const T* src = partial[size_t(part - 1)].data();
      for (int64_t k = 0; k < WN; ++k) gw[k] += src[k];
    }
    return;
  }
  const int64_t nb = blocks_for(g.G, Cg);
  parallel_for(g.G * nb, grain_for(flops / double(g.G * nb)), [&](int64_t t0, int64_t t1) {
    std::vector<T> col(g.direct() ? 0 : size_t((Cg + nb - 1) / nb * KK * P)), pad;
    for (int64_t t = t0; t < t1; ++t) {
      int64_t gi = t / nb, b = t % nb;
      int64_t c0 = Cg * b / nb, c1 = Cg * (b + 1) / nb, kb = (c1 - c0) * KK;
      if (kb == 0) continue;
      for (int64_t n = 0; n < g.N; ++n) {
        const T* src = x + (n * g.C + gi * Cg + c0) * HW;
        if (!g.direct()) {
          im2col(src, c1 - c0, 0, g.OH, g, col.data(), pad);
          src = col.data();
        }
        gemm(false, true, Og, kb, P, gy + (n * g.O + gi * Og) * P, P, src, P, T(1), gw + gi * Og * K + c0 * KK, K);
      }
    }
  });
}

// Runs a convolution op: onednn(contiguous inputs, outputs) on oneDNN's kernels where it has one
// (it returns false where not, computing nothing), else loops<T>(contiguous inputs, outputs), the
// im2col loops, for T = float / double. bf16 runs as it is on oneDNN where its native bf16 kernels
// are the faster path (onednn_bf16_preferred). Otherwise f16 and bf16 run on f32 copies, made once,
// through the f32 kernels, each output rounded once (held to AVX2, the loops on the same copies ran
// fmnist_cnn's bf16 forward and input gradient at 1.2x and 1.5x oneDNN's f32 kernels' time).
template <typename D, typename L>
void run_conv(const char* op, const Ins& in, const Outs& out, const D& onednn, const L& loops) {
  const DType t = out[0].dtype();
  TR_CHECK(t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16, op, ": unsupported dtype ",
           dtype_name(t));
  std::vector<Tensor> c;
  if (t == DType::F32 || t == DType::F64 || (t == DType::BF16 && onednn_conv_enabled() && onednn_bf16_preferred())) {
    for (auto& x : in) c.push_back(x.contiguous());
    if (t != DType::F64 && onednn_conv_enabled() && onednn(c, out)) return;
    if (t == DType::F32) return loops.template operator()<float>(c, out);
    if (t == DType::F64) return loops.template operator()<double>(c, out);
    c.clear();
  }
  for (auto& x : in) c.push_back(cast(x, DType::F32).contiguous());
  Outs o;
  for (auto& v : out) o.push_back(empty(v.sizes(), DType::F32));
  if (!(onednn_conv_enabled() && onednn(c, o))) loops.template operator()<float>(c, o);
  for (size_t i = 0; i < out.size(); ++i) out[i].detach().copy_(o[i]);
}

void conv2d_cpu(const Ins& in, Outs& out, const Attrs& a) {
  ConvGeom g = conv_geom(in[0].sizes(), in[1].sizes(), out[0].sizes(), a);
  run_conv(
      "conv2d", in, out,
      [&](const Ins& c, const Outs& o) {
        return onednn_conv2d_forward(g, o[0].dtype(), c[0].raw_data(), c[1].raw_data(),
                                     c.size() == 3 ? c[2].raw_data() : nullptr, o[0].raw_data());
      },
      [&]<typename T>(const Ins& c, const Outs& o) {
        conv2d_forward_fast(static_cast<const T*>(c[0].raw_data()), static_cast<const T*>(c[1].raw_data()),
                            c.size() == 3 ? static_cast<const T*>(c[2].raw_data()) : nullptr,
                            static_cast<T*>(o[0].raw_data()), g);
      });
}
TR_REGISTER_KERNEL(conv2d, CPU, conv2d_cpu);

void conv2d_backward_input_cpu(const Ins& in, Outs& out, const Attrs& a) {
  ConvGeom g = conv_geom(out[0].sizes(), in[1].sizes(), in[0].sizes(), a);
  run_conv(
      "conv2d_backward_input", in, out,
      [&](const Ins& c, const Outs& o) {
        return onednn_conv2d_backward_input(g, o[0].dtype(), c[0].raw_data(), c[1].raw_data(), o[0].raw_data());
      },
      [&]<typename T>(const Ins& c, const Outs& o) {
        conv2d_backward_input_fast(static_cast<const T*>(c[0].raw_data()), static_cast<const T*>(c[1].raw_data()),
                                   static_cast<T*>(o[0].raw_data()), g);
      });
}
TR_REGISTER_KERNEL(conv2d_backward_input, CPU, conv2d_backward_input_cpu);

// gw, and with a second output gb = gy summed over N, OH, OW: oneDNN computes both in one pass (as
// torch's oneDNN convolution does); the im2col path sums gy apart (as torch's slow_conv2d).
void conv2d_backward_weight_cpu(const Ins& in, Outs& out, const Attrs& a) {
  ConvGeom g = conv_geom(in[1].sizes(), out[0].sizes(), in[0].sizes(), a);
  run_conv(
      "conv2d_backward_weight", in, out,
      [&](const Ins& c, const Outs& o) {
        return onednn_conv2d_backward_weight(g, o[0].dtype(), c[0].raw_data(), c[1].raw_data(), o[0].raw_data(),
                                             o.size() == 2 ? o[1].raw_data() : nullptr);
      },
      [&]<typename T>(const Ins& c, const Outs& o) {
        conv2d_backward_weight_fast(static_cast<const T*>(c[0].raw_data()), static_cast<const T*>(c[1].raw_data()),
                                    static_cast<T*>(o[0].raw_data()), g);
        if (o.size() == 2) o[1].detach().copy_(sum(c[0], {0, 2, 3}));
      });
}
TR_REGISTER_KERNEL(conv2d_backward_weight, CPU, conv2d_backward_weight_cpu);

}  // namespace
}  // namespace tr::cpu
