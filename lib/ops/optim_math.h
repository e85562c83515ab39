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
template <typename T>
struct SgdScalars {
  T lr, momentum, dampening_complement /* 1 - dampening */, weight_decay;
  bool nesterov, maximize, has_momentum, has_weight_decay;
};

// d = ±g (+ wd p); buf = first ? d : momentum buf + (1 - dampening) d; d = nesterov ? d + momentum buf : buf;
// p = p - lr d
template <typename T>
TR_HD void sgd_element(T& p, T g, T* buf, bool first, const SgdScalars<T>& s) {
  T d = s.maximize ? -g : g;
  if (s.has_weight_decay) d = d + s.weight_decay * p;
  if (s.has_momentum) {
    T b = first ? d : (*buf * s.momentum) + s.dampening_complement * d;
    *buf = b;
    d = s.nesterov ? d + s.momentum * b : b;
  }
  p = p + (-s.lr) * d;
}

// Scalars of one Adam step of one parameter (its step count fixes the bias corrections).
template <typename T>
struct AdamScalars {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay;
  T decay_factor;  // AdamW: 1 - lr wd
  T neg_step_size; // -lr / (1 - beta1^t)
  T bc2_sqrt;      // sqrt(1 - beta2^t)
  bool decoupled, amsgrad, maximize, has_weight_decay;
};

template <typename T> TR_HD T nan_max(T a, T b) { return (a != a) ? a : ((b != b) ? b : (a > b ? a : b)); }

// AdamW: p = p (1 - lr wd); Adam: g = g + wd p. m = b1 m + (1 - b1) g; v = b2 v + ((1 - b2) g) g;
// amsgrad: vmax = max(vmax, v); p = p + (-step_size m) / (sqrt(v or vmax) / sqrt(bc2) + eps)
template <typename T>
TR_HD void adam_element(T& p, T g, T& m, T& v, T* vmax, const AdamScalars<T>& s) {
  using std::sqrt;
  if (s.maximize) g = -g;
  if (s.decoupled) p = p * s.decay_factor;
  else if (s.has_weight_decay) g = g + s.weight_decay * p;
  m = m * s.beta1;
  m = m + s.one_minus_beta1 * g;
  v = v * s.beta2;
  v = v + (g * s.one_minus_beta2) * g;
  T vv = v;
  if (s.amsgrad) {
    *vmax = nan_max(*vmax, v);
    vv = *vmax;
  }
  const T denom = sqrt(vv) / s.bc2_sqrt + s.eps;
  p = p + (m * s.neg_step_size) / denom;
}

// Element k of a parameter stored as T (buf / vmax may be null), updated in compute type A.
template <typename A, typename T>
TR_HD void sgd_at(T* p, const T* g, T* buf, bool first, int64_t k, const SgdScalars<A>& s) {
  A pk = A(p[k]), bk = buf ? A(buf[k]) : A(0);
  sgd_element<A>(pk, A(g[k]), &bk, first, s);
  p[k] = T(pk);
  if (buf) buf[k] = T(bk);
}
template <typename A, typename T>
TR_HD void adam_at(T* p, const T* g, T* m, T* v, T* vmax, int64_t k, const AdamScalars<A>& s) {
  A pk = A(p[k]), mk = A(m[k]), vk = A(v[k]), xk = vmax ? A(vmax[k]) : A(0);
  adam_element<A>(pk, A(g[k]), mk, vk, &xk, s);
  p[k] = T(pk);
  m[k] = T(mk);
  v[k] = T(vk);
  if (vmax) vmax[k] = T(xk);
}

}  // namespace tr::optim_math
