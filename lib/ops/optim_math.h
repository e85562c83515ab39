// The per-element updates of SGD and Adam/AdamW, compiled for host and device: the fused CPU loop
// (ops/cpu/fused_optim.cpp) and the CUDA multi-tensor kernel (ops/cuda/fused_optim_kernels.cu)
// call these same functions. Each follows torch 1.13's _single_tensor_sgd / _single_tensor_adam(w)
// operation by operation (optim/sgd.cpp, optim/adam.cpp state the formulas), in the compute type
// T (float for f32/f16/bf16, double for f64) with every scalar converted to T first, as the
// pointwise kernels of the composite do.
#pragma once
#include <cmath>
#include <cstdint>
#include "core/macros.h"

namespace tr::optim_math {

// Scalars of one SGD step (per param group).
template <typename T> struct SgdScalars {
  T lr, momentum, dampening_complement /* 1 - dampening */, weight_decay;
  bool nesterov, maximize, has_momentum, has_weight_decay;
};

// d = ±g (+ wd p); buf = first ? d : momentum buf + (1 - dampening) d; d = nesterov ? d + momentum buf : buf;
// p = p - lr d, as pure scalar steps (selects on the scalars, no branches), which the CPU loop
// vectorises: sgd_direction gives d, sgd_buffer the new buffer, sgd_param the new p.
template <typename T> TR_HD T sgd_direction(T p, T g, const SgdScalars<T>& s) {
  const T d = s.maximize ? -g : g;
  return s.has_weight_decay ? d + s.weight_decay * p : d;
}
template <typename T> TR_HD T sgd_buffer(T d, T buf, bool first, const SgdScalars<T>& s) {
  return first ? d : (buf * s.momentum) + s.dampening_complement * d;
}
template <typename T> TR_HD T sgd_param(T p, T d, T buf, const SgdScalars<T>& s) {
  const T step = s.has_momentum ? (s.nesterov ? d + s.momentum * buf : buf) : d;
  return p + (-s.lr) * step;
}

// Scalars of one Adam step of one parameter (its step count fixes the bias corrections).
template <typename T> struct AdamScalars {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay;
  T decay_factor;   // AdamW: 1 - lr wd
  T neg_step_size;  // -lr / (1 - beta1^t)
  T bc2_sqrt;       // sqrt(1 - beta2^t)
  bool decoupled, amsgrad, maximize, has_weight_decay;
};

template <typename T> TR_HD T nan_max(T a, T b) { return (a != a) ? a : ((b != b) ? b : (a > b ? a : b)); }

// AdamW: p = p (1 - lr wd); Adam: g = g + wd p. m = b1 m + (1 - b1) g; v = b2 v + ((1 - b2) g) g;
// amsgrad: vmax = max(vmax, v); p = p + (-step_size m) / (sqrt(v or vmax) / sqrt(bc2) + eps).
// Pure scalar steps, as SGD's: the decayed p, the gradient, the moments, the new p.
template <typename T> TR_HD T adam_decayed(T p, const AdamScalars<T>& s) {
  return s.decoupled ? p * s.decay_factor : p;
}
template <typename T> TR_HD T adam_grad(T g, T p, const AdamScalars<T>& s) {  // p: the parameter before decay
  g = s.maximize ? -g : g;
  return !s.decoupled && s.has_weight_decay ? g + s.weight_decay * p : g;
}
template <typename T> TR_HD T adam_m(T m, T g, const AdamScalars<T>& s) {
  m = m * s.beta1;
  return m + s.one_minus_beta1 * g;
}
template <typename T> TR_HD T adam_v(T v, T g, const AdamScalars<T>& s) {
  v = v * s.beta2;
  return v + (g * s.one_minus_beta2) * g;
}
template <typename T>
TR_HD T adam_param(T p, T m, T v_used, const AdamScalars<T>& s) {  // v_used: v, or vmax with amsgrad
  using std::sqrt;
  const T denom = sqrt(v_used) / s.bc2_sqrt + s.eps;
  return p + (m * s.neg_step_size) / denom;
}

// The scalars in compute type T, from the double values the host computed (every scalar is
// converted to T once, as the composite's pointwise kernels convert theirs).
template <typename T, typename U> TR_HD SgdScalars<T> scalars_as(const SgdScalars<U>& s) {
  return {T(s.lr),    T(s.momentum),  T(s.dampening_complement), T(s.weight_decay), s.nesterov,
          s.maximize, s.has_momentum, s.has_weight_decay};
}
template <typename T, typename U> TR_HD AdamScalars<T> scalars_as(const AdamScalars<U>& s) {
  return {T(s.beta1),        T(s.one_minus_beta1), T(s.beta2),         T(s.one_minus_beta2), T(s.eps),
          T(s.weight_decay), T(s.decay_factor),    T(s.neg_step_size), T(s.bc2_sqrt),        s.decoupled,
          s.amsgrad,         s.maximize,           s.has_weight_decay};
}

// Element k of a parameter stored as T (buf / vmax may be null), updated in compute type A.
template <typename A, typename T>
TR_HD void sgd_at(T* p, const T* g, T* buf, bool first, int64_t k, const SgdScalars<A>& s) {
  const A pk = A(p[k]), d = sgd_direction<A>(pk, A(g[k]), s);
  const A b = buf ? sgd_buffer<A>(d, first ? A(0) : A(buf[k]), first, s) : A(0);
  p[k] = T(sgd_param<A>(pk, d, b, s));
  if (buf) buf[k] = T(b);
}
template <typename A, typename T>
TR_HD void adam_at(T* p, const T* g, T* m, T* v, T* vmax, int64_t k, const AdamScalars<A>& s) {
  const A p0 = A(p[k]), gk = adam_grad<A>(A(g[k]), p0, s);
  const A mk = adam_m<A>(A(m[k]), gk, s), vk = adam_v<A>(A(v[k]), gk, s);
  const A xk = vmax ? nan_max(A(vmax[k]), vk) : vk;
  p[k] = T(adam_param<A>(adam_decayed<A>(p0, s), mk, s.amsgrad ? xk : vk, s));
  m[k] = T(mk);
  v[k] = T(vk);
  if (vmax) vmax[k] = T(xk);
}

}  // namespace tr::optim_math
