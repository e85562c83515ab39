// Per-row formulas of the fused layer norm (native_layer_norm and its backward), compiled for host
// and device: the CPU kernels (ops/cpu/layer_norm.cpp) and the CUDA kernels
// (ops/cuda/layer_norm_kernels.cu) call these same functions. A row is the N values normalised
// together; its statistics are summed in double.
//
// Under autocast the rows are f32 and what reads the norm is a bf16 / f16 product: the kernels then
// write y in that low dtype (the f32 norm rounded once, as the cast after it would) and read its
// gradient in it, and the residual add before the norm can run in the same pass (s = x + h, h of
// the rows' or the low dtype). dispatch_rows picks the pair (rows' type, low type).
#pragma once
#include <cmath>
#include "core/dtype.h"
#include "core/error.h"
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

// the residual add of the fused norm in the rows' type T: what x + h rounds to (the add computes
// in acc_t<T>, the low operand converted exactly)
template <typename T, typename H> TR_HD T residual_add(T x, H h) {
  using A = acc_t<T>;
  return T(A(x) + A(h));
}

template <typename T> struct Type { using type = T; };
// f(Type<T>{}, Type<L>{}) for rows of float dtype t beside the low dtype lo of y / gy: lo == t, or
// f16 / bf16 beside f32 rows.
template <typename F> void dispatch_rows(DType t, DType lo, const char* op, F&& f) {
  if (t == lo) {
    TR_DISPATCH_FLOAT(t, op, [&] { f(Type<scalar_t>{}, Type<scalar_t>{}); });
    return;
  }
  TR_CHECK(t == DType::F32 && (lo == DType::BF16 || lo == DType::F16), op, ": ", dtype_name(lo), " beside ",
           dtype_name(t), " rows (only float16 / bfloat16 beside float32)");
  if (lo == DType::BF16)
    f(Type<float>{}, Type<BFloat16>{});
  else
    f(Type<float>{}, Type<Half>{});
}

}  // namespace tr::ln
