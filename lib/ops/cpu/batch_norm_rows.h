// The per-row loops of the CPU batch-norm kernels, over x viewed as [N, C, L] (L = the product of
// the dims after 1): sums in double on 4 vectors of 4 lanes (ops/cpu/vec4.h; a single running vector
// sum would wait on the add latency every 4 elements), and the elementwise passes of
// ops/batch_norm_math.h. Shared by ops/cpu/batch_norm.cpp and the fused batch norm + relu + max
// pool (ops/cpu/batch_norm_relu_pool.cpp), so that both sum in one order.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>
#include "ops/batch_norm_math.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/vec4.h"

namespace tr::cpu::bn_rows {

struct NCL {
  int64_t N, C, L;
  double M() const { return double(N) * double(L); }  // values per channel
  int64_t row(int64_t n, int64_t c) const { return (n * C + c) * L; }
};

inline NCL ncl_of(const Shape& s) {
  int64_t L = 1;
  for (size_t i = 2; i < s.size(); ++i) L *= s[i];
  return {s[0], s[1], L};
}

// f(c0, c1) for blocks of channels split across the pool (about kGrain values a block at least).
template <typename F> void for_channel_blocks(const NCL& g, const F& f) {
  int64_t per = std::max<int64_t>(1, g.N * g.L);
  parallel_for(g.C, std::max<int64_t>(1, kGrain / per), f);
}

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

// The statistics of the channels [c0, c1): mean = S(x) / M, var = S((x - mean)^2) / M (biased), two
// passes as torch's CPU kernel; written to mean_out[c] and var_out[c], and the affine coefficients
// alpha = invstd w, beta = b - mean alpha for the block (indexed c - c0).
template <typename T> void channel_statistics(const T* x, const T* w, const T* b, T* mean_out, T* var_out, const NCL& g,
                                              int64_t c0, int64_t c1, double eps, std::vector<double>& alpha,
                                              std::vector<double>& beta) {
  const size_t nc = size_t(c1 - c0);
  std::vector<double> mean(nc, 0.0), var(nc, 0.0);
  alpha.assign(nc, 0.0);
  beta.assign(nc, 0.0);
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
}

// The backward's coefficients of the channels [c0, c1) (indexed c - c0) from their sums S(gy) and
// S(gy xmu); gb[c] and gw[c] written.
template <typename T> struct GradRowCoefficients { std::vector<acc_t<T>> k, grad_mean, mean, scale; };
template <typename T> GradRowCoefficients<T> grad_row_coefficients(const std::vector<double>& s_g,
                                                                   const std::vector<double>& s_gxmu, const T* w,
                                                                   const T* mean, const T* var, T* gw, T* gb,
                                                                   const NCL& g, int64_t c0, int64_t c1, double eps) {
  using A = acc_t<T>;
  GradRowCoefficients<T> r;
  for (int64_t c = c0; c < c1; ++c) {
    const size_t i = size_t(c - c0);
    const bn::GradCoefficients q = bn::grad_coefficients(s_g[i], s_gxmu[i], at(var, c), at(w, c), eps, g.M());
    gb[c] = T(q.gb);
    gw[c] = T(q.gw);
    r.k.push_back(A(q.k));
    r.grad_mean.push_back(A(q.grad_mean));
    r.mean.push_back(A(at(mean, c)));
    r.scale.push_back(A(q.scale));
  }
  return r;
}

}  // namespace tr::cpu::bn_rows
