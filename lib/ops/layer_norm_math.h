// Per-row formulas of the fused layer norm (native_layer_norm and its backward), compiled for host
// and device: the CPU kernels (ops/cpu/layer_norm.cpp) and the CUDA kernels
// (ops/cuda/layer_norm_kernels.cu) call these same functions. A row is the N values normalised
// together; its statistics are summed in double.
#pragma once
#include <cmath>
#include "core/macros.h"

namespace tr::ln {

// rstd = 1 / sqrt(var + eps) of a row's biased variance
TR_HD double rstd_of(double var, double eps) {
  using std::sqrt;
  return 1.0 / sqrt(var + eps);
}
// y = ((x - mean) rstd) w + b, as the composite rounds it: each product in the compute type
template <typename A> TR_HD A normalize(A x, A mean, A rstd, A w, A b) { return ((x - mean) * rstd) * w + b; }

// With xhat = (x - mean) rstd and g = gy w over a row of N values, a = S(g) / N and
// c = S(g xhat) / N: gx = rstd (g - a - xhat c).
template <typename A> TR_HD A grad_input(A gy, A x, A w, A mean, A rstd, A a, A c) {
  const A xhat = (x - mean) * rstd;
  return rstd * (gy * w - a - xhat * c);
}

}  // namespace tr::ln
