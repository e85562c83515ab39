// clip_grad_norm's arithmetic, compiled for host and device: the fused CPU loop
// (ops/cpu/fused_clip.cpp) and the CUDA multi-tensor kernels (ops/cuda/fused_clip_kernels.cu) call
// these same functions. torch's clip_grad_norm_ takes each gradient's norm, then the norm of those
// norms (in the gradients' dtype), and scales every gradient by
//   coef = min((1 / (total + 1e-6)) * max_norm, 1)
// computed in total's dtype, as its tensor expression evaluates it. The sums run in the compute
// type A (float for f32/f16/bf16, double for f64) over chunks of kNormChunk elements.
#pragma once
#include <cmath>
#include <cstdint>
#include "core/macros.h"

namespace tr::clip_math {

constexpr int64_t kNormChunk = 65536;

// What a p-norm sums per element (p = inf: the max of |x|, combined by norm_combine).
template <typename A> TR_HD A norm_term(A x, A p) {
  using std::fabs;
  using std::pow;
  const A a = fabs(x);
  if (p == A(2)) return a * a;
  if (p == A(1)) return a;
  if (p == A(INFINITY)) return a;
  return pow(a, p);
}
template <typename A> TR_HD A norm_combine(A s, A t, A p) {
  if (p == A(INFINITY)) return s > t || s != s ? s : t;  // a NaN stays
  return s + t;
}
// The norm from the combined terms.
template <typename A> TR_HD A norm_finish(A s, A p) {
  using std::pow;
  using std::sqrt;
  if (p == A(2)) return sqrt(s);
  if (p == A(1) || p == A(INFINITY)) return s;
  return pow(s, A(1) / p);
}
// min((1 / (total + 1e-6)) * max_norm, 1), a NaN total giving NaN (torch's clamp keeps it)
template <typename A> TR_HD A clip_coef(A total, A max_norm) {
  const A c = (A(1) / (total + A(1e-6))) * max_norm;
  return c > A(1) ? A(1) : c;
}

}  // namespace tr::clip_math
