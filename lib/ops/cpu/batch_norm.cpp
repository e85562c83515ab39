// CPU batch-norm kernels (batch_norm, batch_norm_backward, batch_norm_elemt) over x viewed as
// [N, C, L], L = the product of the dims after 1. Per-channel sums run in double (mean, then the
// squared deviations: two passes, as torch's CPU kernel), and the output is y = x alpha + beta with
// alpha = invstd w and beta = b - mean alpha per channel.
// Each thread owns a block of channels [c0, c1) and sweeps it sample by sample: the rows x[n, c0:c1]
// are contiguous, so a sweep streams through memory (one channel at a time would jump a whole
// sample between rows of a few KiB, and every row would start with cold prefetchers: 2x slower).
// Each channel is summed by one thread in a fixed order: results do not depend on the thread count.
// The composite in lib/ops/batch_norm.cpp (mean/var/rsqrt/mul/add) is the specification that
// tests/unit/test_batch_norm_op.cpp checks these kernels against.
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>
#include "ops/batch_norm_math.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/vec4.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::cpu {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

struct NCL {
  int64_t N, C, L;
  double M() const { return double(N) * double(L); }  // values per channel
  int64_t row(int64_t n, int64_t c) const { return (n * C + c) * L; }
};

NCL ncl_of(const Shape& s) {
  int64_t L = 1;
  for (size_t i = 2; i < s.size(); ++i) L *= s[i];
  return {s[0], s[1], L};
}

// f(c0, c1) for blocks of channels split across the pool (about kGrain values a block at least).
template <typename F> void for_channel_blocks(const NCL& g, const F& f) {
  int64_t per = std::max<int64_t>(1, g.N * g.L);
  parallel_for(g.C, std::max<int64_t>(1, kGrain / per), f);
}

// Row sums run in double on 4 vectors of 4 lanes (ops/cpu/vec4.h): a single running vector sum
// would wait on the add latency every 4 elements.

// f32 and f64 take the vector loops; f16 / bf16 the scalar tails only.
template <typename T> constexpr bool kVec4 = std::is_same_v<T, float> || std::is_same_v<T, double>;
inline double hsum(d4 t) { return (t[0] + t[1]) + (t[2] + t[3]); }

template <typename T> inline double at(const T* p, int64_t i) { return double(acc_t<T>(p[i])); }

// sum over l < L of f(row[l]) in double; f takes a double or a d4 of values
template <typename T, typename F> double row_sum(const T* row, int64_t L, const F& f) {
  int64_t l = 0;
  double s = 0;
  if constexpr (kVec4<T>) {
    d4 a0{}, a1{}, a2{}, a3{};
    for (; l + 16 <= L; l += 16) {
      a0 += f(load4_as_double(row + l));
      a1 += f(load4_as_double(row + l + 4));
      a2 += f(load4_as_double(row + l + 8));
      a3 += f(load4_as_double(row + l + 12));
    }
    s = hsum((a0 + a1) + (a2 + a3));
  }
  for (; l < L; ++l) s += f(at(row, l));
  return s;
}

// s_g += sum gy[l], s_gxmu += sum gy[l] (x[l] - mean) over a row, in double
template <typename T> void row_grad_sums(const T* gy, const T* x, int64_t L, double mean, double& s_g, double& s_gxmu) {
  int64_t l = 0;
  if constexpr (kVec4<T>) {
    d4 s0{}, s1{}, d0{}, d1{};
    for (; l + 8 <= L; l += 8) {
      d4 g0 = load4_as_double(gy + l), g1 = load4_as_double(gy + l + 4);
      s0 += g0;
      s1 += g1;
      d0 += g0 * (load4_as_double(x + l) - mean);
      d1 += g1 * (load4_as_double(x + l + 4) - mean);
    }
    s_g += hsum(s0 + s1);
    s_gxmu += hsum(d0 + d1);
  }
  for (; l < L; ++l) {
    s_g += at(gy, l);
    s_gxmu += at(gy, l) * (at(x, l) - mean);
  }
}

// y = x alpha + beta over a row
template <typename T, typename A> void row_affine(const T* x, T* y, int64_t L, A alpha, A beta) {
#pragma omp simd
  for (int64_t l = 0; l < L; ++l) y[l] = T(bn::affine(A(x[l]), alpha, beta));
}

// gx = (gy - grad_mean - (x - mean) k) scale over a row (torch's CPU form)
template <typename T, typename A>
void row_grad_input(const T* gy, const T* x, T* gx, int64_t L, A k, A grad_mean, A mean, A scale) {
#pragma omp simd
  for (int64_t l = 0; l < L; ++l) gx[l] = T(bn::grad_input(A(gy[l]), A(x[l]), k, grad_mean, mean, scale));
}

// y[:, c] = x[:, c] alpha[c] + beta[c] for the channels of [c0, c1)
template <typename T> void affine_block(const T* x, T* y, const NCL& g, int64_t c0, int64_t c1,
                                        const std::vector<double>& alpha, const std::vector<double>& beta) {
  using A = acc_t<T>;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t c = c0; c < c1; ++c)
      row_affine(x + g.row(n, c), y + g.row(n, c), g.L, A(alpha[size_t(c - c0)]), A(beta[size_t(c - c0)]));
}

// mean = S(x) / M, var = S((x - mean)^2) / M (biased), y = x alpha + beta
template <typename T>
void batch_norm_kernel(const T* x, const T* w, const T* b, T* y, T* mean_out, T* var_out, const NCL& g, double eps) {
  for_channel_blocks(g, [&](int64_t c0, int64_t c1) {
    const size_t nc = size_t(c1 - c0);
    std::vector<double> mean(nc, 0.0), var(nc, 0.0), alpha(nc), beta(nc);
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t c = c0; c < c1; ++c) mean[size_t(c - c0)] += row_sum(x + g.row(n, c), g.L, [](auto v) { return v; });
    for (auto& m : mean) m /= g.M();
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t c = c0; c < c1; ++c) {
        const double m = mean[size_t(c - c0)];
        var[size_t(c - c0)] += row_sum(x + g.row(n, c), g.L, [m](auto v) {
          auto d = v - m;
          return d * d;
        });
      }
    for (int64_t c = c0; c < c1; ++c) {
      const size_t i = size_t(c - c0);
      var[i] /= g.M();
      mean_out[c] = T(mean[i]);
      var_out[c] = T(var[i]);
      bn::affine_coefficients(at(w, c), at(b, c), mean[i], var[i], eps, &alpha[i], &beta[i]);
    }
    affine_block(x, y, g, c0, c1, alpha, beta);
  });
}

// gb = S(gy), gw = S(gy xmu) invstd, gx = (gy - S(gy)/M - xmu invstd^2 S(gy xmu)/M) invstd w
template <typename T> void batch_norm_backward_kernel(const T* gy, const T* x, const T* w, const T* mean, const T* var,
                                                      T* gx, T* gw, T* gb, const NCL& g, double eps) {
  using A = acc_t<T>;
  for_channel_blocks(g, [&](int64_t c0, int64_t c1) {
    const size_t nc = size_t(c1 - c0);
    std::vector<double> s_g(nc, 0.0), s_gxmu(nc, 0.0);
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t c = c0; c < c1; ++c)
        row_grad_sums(gy + g.row(n, c), x + g.row(n, c), g.L, at(mean, c), s_g[size_t(c - c0)], s_gxmu[size_t(c - c0)]);
    std::vector<A> k(nc), grad_mean(nc), m(nc), scale(nc);
    for (int64_t c = c0; c < c1; ++c) {
      const size_t i = size_t(c - c0);
      const bn::GradCoefficients q = bn::grad_coefficients(s_g[i], s_gxmu[i], at(var, c), at(w, c), eps, g.M());
      gb[c] = T(q.gb);
      gw[c] = T(q.gw);
      k[i] = A(q.k);
      grad_mean[i] = A(q.grad_mean);
      m[i] = A(at(mean, c));
      scale[i] = A(q.scale);
    }
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t c = c0; c < c1; ++c) {
        const size_t i = size_t(c - c0);
        row_grad_input(gy + g.row(n, c), x + g.row(n, c), gx + g.row(n, c), g.L, k[i], grad_mean[i], m[i], scale[i]);
      }
  });
}

void batch_norm_cpu(const Ins& in, Outs& out, const Attrs& a) {
  Tensor x = in[0].contiguous(), w = in[1].contiguous(), b = in[2].contiguous();
  TR_DISPATCH_FLOAT(x.dtype(), "batch_norm", [&] {
    batch_norm_kernel(x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(),
                      out[0].data_ptr<scalar_t>(), out[1].data_ptr<scalar_t>(), out[2].data_ptr<scalar_t>(),
                      ncl_of(x.sizes()), a.f("eps"));
  });
}
TR_REGISTER_KERNEL(batch_norm, CPU, batch_norm_cpu);

void batch_norm_backward_cpu(const Ins& in, Outs& out, const Attrs& a) {
  Tensor gy = in[0].contiguous(), x = in[1].contiguous(), w = in[2].contiguous(), m = in[3].contiguous(),
         v = in[4].contiguous();
  TR_DISPATCH_FLOAT(x.dtype(), "batch_norm_backward", [&] {
    batch_norm_backward_kernel(gy.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
                               m.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(), out[0].data_ptr<scalar_t>(),
                               out[1].data_ptr<scalar_t>(), out[2].data_ptr<scalar_t>(), ncl_of(x.sizes()), a.f("eps"));
  });
}
TR_REGISTER_KERNEL(batch_norm_backward, CPU, batch_norm_backward_cpu);

// y = x alpha + beta, alpha = w / sqrt(var + eps), beta = b - mean alpha
void batch_norm_elemt_cpu(const Ins& in, Outs& out, const Attrs& a) {
  Tensor x = in[0].contiguous(), w = in[1].contiguous(), b = in[2].contiguous(), m = in[3].contiguous(),
         v = in[4].contiguous();
  const double eps = a.f("eps");
  const NCL g = ncl_of(x.sizes());
  TR_DISPATCH_FLOAT(x.dtype(), "batch_norm_elemt", [&] {
    using T = scalar_t;
    const T *px = x.data_ptr<T>(), *pw = w.data_ptr<T>(), *pb = b.data_ptr<T>(), *pm = m.data_ptr<T>(),
            *pv = v.data_ptr<T>();
    T* py = out[0].data_ptr<T>();
    for_channel_blocks(g, [&](int64_t c0, int64_t c1) {
      std::vector<double> alpha, beta;
      for (int64_t c = c0; c < c1; ++c) {
        double al, be;
        bn::affine_coefficients(at(pw, c), at(pb, c), at(pm, c), at(pv, c), eps, &al, &be);
        alpha.push_back(al);
        beta.push_back(be);
      }
      affine_block(px, py, g, c0, c1, alpha, beta);
    });
  });
}
TR_REGISTER_KERNEL(batch_norm_elemt, CPU, batch_norm_elemt_cpu);

}  // namespace
}  // namespace tr::cpu
