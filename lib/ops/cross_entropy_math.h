// Per-row formulas of the fused cross entropy (cross_entropy_rows and its backward), compiled for
// host and device: the CPU kernels (ops/cpu/cross_entropy.cpp) and the CUDA kernels
// (ops/cuda/cross_entropy_kernels.cu) call these same functions. A row is the V logits x of one
// sample, its target t and the smoothing ls; A is the compute type (f32, f64 for f64 rows).
//   lse  = log sum_k exp(x_k) = m + log s,  m = max x,  s = sum_k exp(x_k - m)
//   loss = (1-ls) (lse - x_t) + ls (lse - sum_k x_k / V)     (0 where t == ignore_index)
//   dx_k = a p_k - b ((1-ls) [k == t] + ls/V),  p_k = exp(x_k - lse)
// with a = b + g_lse, b = g_loss (0 where t == ignore_index): the gradient of g_loss loss + g_lse lse.
#pragma once
#include <cmath>
#include <cstdint>
#include "core/macros.h"

namespace tr::ce {

// The running state of one row (or of any set of its elements): m and s as above over the
// elements seen, sum_x their sum, arg the first index of the max (-1: none seen). A NaN is the max
// at its first index, as torch.argmax, and makes s (so lse and the loss) NaN.
template <typename A> struct Stats {
  A m, s, sum_x;
  int64_t arg;
};

template <typename A> TR_HD Stats<A> empty_stats() { return {A(-INFINITY), A(0), A(0), -1}; }

// Whether (v, i) is the argmax over (w, j): larger, or a NaN (the first NaN wins), ties to the
// lower index.
template <typename A> TR_HD bool wins(A v, int64_t i, A w, int64_t j) {
  const bool vn = v != v, wn = w != w;
  if (vn || wn) return vn && (!wn || i < j);
  return v > w || (v == w && i < j);
}

// s rescaled from max m to max M: exp(m - M) s, exact where m == M (also for m = M = -inf or +inf,
// where m - M is NaN).
template <typename A> TR_HD A rescale(A s, A m, A M) {
  using std::exp;
  return m == M ? s : s * exp(m - M);
}

// The state of the union of two disjoint sets of a row's elements (any order).
template <typename A> TR_HD Stats<A> merge(const Stats<A>& a, const Stats<A>& b) {
  if (b.arg < 0) return {a.m, a.s, a.sum_x + b.sum_x, a.arg};
  if (a.arg < 0) return {b.m, b.s, a.sum_x + b.sum_x, b.arg};
  const bool first = wins(a.m, a.arg, b.m, b.arg);
  const A M = first ? a.m : b.m;
  return {M, rescale(a.s, a.m, M) + rescale(b.s, b.m, M), a.sum_x + b.sum_x, first ? a.arg : b.arg};
}

// The state with element x_k added: at most one exp.
template <typename A> TR_HD void push(Stats<A>& st, A x, int64_t k) { st = merge(st, Stats<A>{x, A(1), x, k}); }

template <typename A> TR_HD A lse_of(const Stats<A>& st) {
  using std::log;
  return st.m + log(st.s);
}

// The row's loss from its lse, its target's logit x_t and the sum of its logits (unused when ls = 0,
// so that an infinite logit elsewhere does not reach an unsmoothed loss).
template <typename A> TR_HD A row_loss(A lse, A x_t, A sum_x, A ls, int64_t V) {
  const A nll = lse - x_t;
  if (ls == A(0)) return nll;
  return (A(1) - ls) * nll + ls * (lse - sum_x / A(V));
}

// dx_k for one element (is_target: k == t).
template <typename A> TR_HD A grad(A x, A lse, A a, A b, A ls, int64_t V, bool is_target) {
  using std::exp;
  const A q = is_target ? (A(1) - ls) + ls / A(V) : ls / A(V);
  return a * exp(x - lse) - b * q;
}

}  // namespace tr::ce
