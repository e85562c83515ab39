// CPU kernels of native_layer_norm, _add_native_layer_norm and their backward over rows [R, N]
// (y and gy in the rows' dtype or a low one beside f32 rows, ops/layer_norm_math.h): row statistics
// in double (mean, then squared deviations: two passes, each summed in vector lanes), the elementwise parts in the
// compute type with ops/layer_norm_math.h; parallel over rows, and the weight and bias gradients (sums over rows)
// parallel over column blocks, each column summed in row order (no dependence on threads).
#include "ops/cpu/loops.h"
#include "ops/cpu/vec4.h"
#include "ops/layer_norm_math.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::cpu {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

// y = norm(v) of type Y per row, v = x (h null) or s = x + h written to s (the residual add fused in)
template <typename T, typename Y, typename H, typename S>
void layer_norm_kernel(const T* x, const H* h, T* s, const T* w, const T* b, Y* y, S* mean_out, S* rstd_out, int64_t R,
                       int64_t N, double eps) {
  using A = acc_t<T>;
  parallel_for(R, std::max<int64_t>(1, kGrain / std::max<int64_t>(N, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * N;
      if (h) {
        const H* hr = h + r * N;
        T* sr = s + r * N;
#pragma omp simd
        for (int64_t j = 0; j < N; ++j) sr[j] = ln::residual_add(xr[j], hr[j]);
        xr = sr;
      }
      double sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < N; ++j) sum += double(A(xr[j]));
      const double mean = sum / double(N);
      double q = 0;
#pragma omp simd reduction(+ : q)
      for (int64_t j = 0; j < N; ++j) {
        const double d = double(A(xr[j])) - mean;
        q += d * d;
      }
      const double rstd = ln::rstd_of(q / double(N), eps);
      mean_out[r] = S(mean);
      rstd_out[r] = S(rstd);
      const A m = A(mean), rs = A(rstd);
      Y* yr = y + r * N;
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) yr[j] = Y(T(ln::normalize(A(xr[j]), m, rs, A(w[j]), A(b[j]))));
    }
  });
}

// The f32 weight and bias gradients: a thread owns a run of whole 4-column groups and sweeps the
// rows, its double accumulators loaded once per 4 rows and the rows added in order (the bits of
// one row at a time); long contiguous reads instead of a 64-column block per thread.
void column_grads_f32(const float* gy, const float* x, const float* mean, const float* rstd, float* gw, float* gb,
                      int64_t R, int64_t N) {
  const int64_t groups = N / 4;
  parallel_runs(groups, 1, [&](int64_t g0, int64_t g1) {
    std::vector<d4> sw(size_t(g1 - g0), d4{0, 0, 0, 0}), sb(size_t(g1 - g0), d4{0, 0, 0, 0});
    // one row's contribution to the group at q: (gy xhat, gy) as doubles
    auto row = [&](int64_t r, int64_t col, d4& w, d4& b) {
      const f4 g = load_f4(gy + r * N + col), xv = load_f4(x + r * N + col);
      w += __builtin_convertvector(g * ((xv - mean[r]) * rstd[r]), d4);
      b += __builtin_convertvector(g, d4);
    };
    int64_t r = 0;
    for (; r + 4 <= R; r += 4)
      for (int64_t k = 0; k < g1 - g0; ++k) {
        d4 w = sw[size_t(k)], b = sb[size_t(k)];
        for (int64_t q = r; q < r + 4; ++q) row(q, 4 * (g0 + k), w, b);
        sw[size_t(k)] = w;
        sb[size_t(k)] = b;
      }
    for (; r < R; ++r)
      for (int64_t k = 0; k < g1 - g0; ++k) row(r, 4 * (g0 + k), sw[size_t(k)], sb[size_t(k)]);
    for (int64_t k = 0; k < g1 - g0; ++k)
      for (int j = 0; j < 4; ++j) {
        gw[4 * (g0 + k) + j] = float(sw[size_t(k)][j]);
        gb[4 * (g0 + k) + j] = float(sb[size_t(k)][j]);
      }
  });
  for (int64_t j = groups * 4; j < N; ++j) {
    double w = 0, b = 0;
    for (int64_t r = 0; r < R; ++r) {
      const float g = gy[r * N + j];
      w += double(g * ((x[r * N + j] - mean[r]) * rstd[r]));
      b += double(g);
    }
    gw[j] = float(w);
    gb[j] = float(b);
  }
}

// gx = gs + d(norm)/dx of type T (gs null: 0), gh = gx rounded to G where asked; gw, gb
template <typename T, typename G, typename S>
void layer_norm_backward_kernel(const G* gy, const T* x, const T* w, const S* mean, const S* rstd, const T* gs, T* gx,
                                G* gh, T* gw, T* gb, int64_t R, int64_t N) {
  using A = acc_t<T>;
  parallel_for(R, std::max<int64_t>(1, kGrain / std::max<int64_t>(N, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const G* gr = gy + r * N;
      const T* xr = x + r * N;
      const A m = A(mean[r]), rs = A(rstd[r]);
      double sg = 0, sgx = 0;
#pragma omp simd reduction(+ : sg, sgx)
      for (int64_t j = 0; j < N; ++j) {
        const double g = double(A(gr[j]) * A(w[j]));
        sg += g;
        sgx += g * double((A(xr[j]) - m) * rs);
      }
      const A a = A(sg / double(N)), c = A(sgx / double(N));
      T* gxr = gx + r * N;
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) gxr[j] = T(ln::grad_input(A(gr[j]), A(xr[j]), A(w[j]), m, rs, a, c));
      if (gs) {
        const T* gsr = gs + r * N;
#pragma omp simd
        for (int64_t j = 0; j < N; ++j) gxr[j] = T(A(gsr[j]) + A(gxr[j]));
      }
      if (gh) {
        G* ghr = gh + r * N;
#pragma omp simd
        for (int64_t j = 0; j < N; ++j) ghr[j] = G(A(gxr[j]));
      }
    }
  });
  // gw[j] = S_r gy[r, j] xhat[r, j], gb[j] = S_r gy[r, j], each column in row order
  if constexpr (std::is_same_v<T, float> && std::is_same_v<G, float>) {
    column_grads_f32(gy, x, mean, rstd, gw, gb, R, N);
    return;
  }
  constexpr int64_t kCols = 64;
  const int64_t blocks = (N + kCols - 1) / kCols;
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    alignas(64) double sw[kCols], sb[kCols];
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t c0 = blk * kCols, wd = std::min(kCols, N - c0);
      for (int64_t j = 0; j < kCols; ++j) sw[j] = sb[j] = 0.0;
      for (int64_t r = 0; r < R; ++r) {
        const G* gr = gy + r * N + c0;
        const T* xr = x + r * N + c0;
        const A m = A(mean[r]), rs = A(rstd[r]);
#pragma omp simd
        for (int64_t j = 0; j < wd; ++j) {
          sw[j] += double(A(gr[j]) * ((A(xr[j]) - m) * rs));
          sb[j] += double(A(gr[j]));
        }
      }
      for (int64_t j = 0; j < wd; ++j) {
        gw[c0 + j] = T(A(sw[j]));
        gb[c0 + j] = T(A(sb[j]));
      }
    }
  });
}

template <typename T> using stat_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// out: {y, mean, rstd}, or {s, y, mean, rstd} with h
void layer_norm_rows(const Tensor& x_in, const Tensor& h_in, const Tensor& w_in, const Tensor& b_in, Outs& out,
                     double eps) {
  const Tensor x = x_in.contiguous(), w = w_in.contiguous(), b = b_in.contiguous();
  const Tensor h = h_in.defined() ? h_in.contiguous() : Tensor();
  const size_t o = h.defined() ? 1 : 0;
  const int64_t R = x.size(0), N = x.size(1);
  ln::dispatch_rows(x.dtype(), out[o].dtype(), "native_layer_norm", [&](auto rows, auto low) {
    using T = typename decltype(rows)::type;
    using L = typename decltype(low)::type;
    using S = stat_t<T>;
    T* s = h.defined() ? out[0].data_ptr<T>() : nullptr;
    auto run = [&](auto* hp) {
      layer_norm_kernel(x.data_ptr<T>(), hp, s, w.data_ptr<T>(), b.data_ptr<T>(), out[o].data_ptr<L>(),
                        out[o + 1].data_ptr<S>(), out[o + 2].data_ptr<S>(), R, N, eps);
    };
    if (h.defined() && h.dtype() != x.dtype()) {
      TR_CHECK(h.dtype() == out[o].dtype(), "_add_native_layer_norm: h of ", dtype_name(h.dtype()), " beside ",
               dtype_name(x.dtype()), " rows and a ", dtype_name(out[o].dtype()), " result");
      run(h.data_ptr<L>());
    } else {
      run(h.defined() ? h.data_ptr<T>() : static_cast<const T*>(nullptr));
    }
  });
}

void native_layer_norm_cpu(const Ins& in, Outs& out, const Attrs& a) {
  layer_norm_rows(in[0], Tensor(), in[1], in[2], out, a.f("eps"));
}
TR_REGISTER_KERNEL(native_layer_norm, CPU, native_layer_norm_cpu);

void add_native_layer_norm_cpu(const Ins& in, Outs& out, const Attrs& a) {
  layer_norm_rows(in[0], in[1], in[2], in[3], out, a.f("eps"));
}
TR_REGISTER_KERNEL(_add_native_layer_norm, CPU, add_native_layer_norm_cpu);

// in: gy, x, w, mean, rstd[, gs]; out: gx, gw, gb[, gh]
void native_layer_norm_backward_cpu(const Ins& in, Outs& out, const Attrs&) {
  const Tensor gy = in[0].contiguous(), x = in[1].contiguous(), w = in[2].contiguous(), m = in[3].contiguous(),
               rs = in[4].contiguous();
  const Tensor gs = in.size() > 5 && in[5].defined() ? in[5].contiguous() : Tensor();
  const int64_t R = x.size(0), N = x.size(1);
  ln::dispatch_rows(x.dtype(), gy.dtype(), "native_layer_norm_backward", [&](auto rows, auto low) {
    using T = typename decltype(rows)::type;
    using G = typename decltype(low)::type;
    using S = stat_t<T>;
    layer_norm_backward_kernel<T, G, S>(gy.data_ptr<G>(), x.data_ptr<T>(), w.data_ptr<T>(), m.data_ptr<S>(),
                                        rs.data_ptr<S>(), gs.defined() ? gs.data_ptr<T>() : nullptr,
                                        out[0].data_ptr<T>(), out.size() > 3 ? out[3].data_ptr<G>() : nullptr,
                                        out[1].data_ptr<T>(), out[2].data_ptr<T>(), R, N);
  });
}
TR_REGISTER_KERNEL(native_layer_norm_backward, CPU, native_layer_norm_backward_cpu);
TR_REGISTER_KERNEL(_add_native_layer_norm_backward, CPU, native_layer_norm_backward_cpu);

}  // namespace

}  // namespace tr::cpu
