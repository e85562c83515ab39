// Per-channel formulas of the batch-norm kernels, compiled for host and device: the CPU kernels
// (ops/cpu/batch_norm.cpp) and the CUDA kernels (ops/cuda/batch_norm_kernels.cu) call these same
// functions. Statistics and coefficients are in double; the elementwise parts in the compute type.
#pragma once
#include <cmath>
#include "core/macros.h"

namespace tr::bn {

// y = x alpha + beta normalises with (mean, var): alpha = w / sqrt(var + eps), beta = b - mean alpha.
TR_HD void affine_coefficients(double w, double b, double mean, double var, double eps, double* alpha, double* beta) {
  using std::sqrt;
  *alpha = w / sqrt(var + eps);
  *beta = b - mean * *alpha;
}
template <typename A> TR_HD A affine(A x, A alpha, A beta) { return x * alpha + beta; }

// The backward's per-channel terms from S(gy) and S(gy (x - mean)) over the channel's M values:
// gb = S(gy), gw = S(gy xmu) invstd, and gx = (gy - grad_mean - (x - mean) k) scale with
// k = S(gy xmu) invstd^2 / M, grad_mean = S(gy) / M, scale = invstd w (torch's CPU form).
struct GradCoefficients {
  double gb, gw, k, grad_mean, scale;
};
TR_HD GradCoefficients grad_coefficients(double s_g, double s_gxmu, double var, double w, double eps, double M) {
  using std::sqrt;
  const double invstd = 1.0 / sqrt(var + eps);
  return {s_g, s_gxmu * invstd, s_gxmu * invstd * invstd / M, s_g / M, invstd * w};
}
template <typename A> TR_HD A grad_input(A gy, A x, A k, A grad_mean, A mean, A scale) {
  return (gy - grad_mean - (x - mean) * k) * scale;
}

}  // namespace tr::bn
