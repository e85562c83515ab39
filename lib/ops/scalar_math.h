// Scalar formulas of the pointwise ops, compiled for host and device: the CPU kernels and the
// CUDA kernels call these same functions, so CPU tests exercise the GPU's math.
// T is the compute type acc_t<dtype>: float or double (f16/bf16 compute in float), or the integer
// type itself for the ops that take integers.
#pragma once
#include <cmath>
#include <type_traits>
#include "core/macros.h"

namespace tr::math {

template <typename T> TR_HD T add(T a, T b, T alpha) { return a + alpha * b; }
template <typename T> TR_HD T sub(T a, T b, T alpha) { return a - alpha * b; }
template <typename T> TR_HD T mul(T a, T b) { return a * b; }
template <typename T> TR_HD T div(T a, T b) { return a / b; }
template <typename T> TR_HD T maximum(T a, T b) { return (a != a) ? a : ((b != b) ? b : (a > b ? a : b)); }
template <typename T> TR_HD T minimum(T a, T b) { return (a != a) ? a : ((b != b) ? b : (a < b ? a : b)); }
// integers: the double pow, truncated (what std::pow(int, int) computes; CUDA has no integer pow)
template <typename T> TR_HD T pow(T a, T b) {
  using std::pow;
  if constexpr (std::is_integral_v<T>)
    return T(pow(double(a), double(b)));
  else
    return pow(a, b);
}
// pow with a scalar exponent, as torch computes it: 0.5 and -0.5 through sqrt and 1/sqrt,
// 2 and 3 as products (these differ from pow() at -inf and -0).
template <typename T> TR_HD T pow_scalar(T a, T b) {
  using std::sqrt;
  if constexpr (std::is_floating_point_v<T>) {  // T(0.5) would truncate to 0 for integers
    if (b == T(0.5)) return sqrt(a);
    if (b == T(-0.5)) return T(1) / sqrt(a);
  }
  if (b == T(2)) return a * a;
  if (b == T(3)) return a * a * a;
  return pow(a, b);
}
template <typename T> TR_HD T neg(T x) { return -x; }
// relu's backward (torch's threshold_backward): the gradient where the result exceeds the threshold
template <typename T> TR_HD T threshold_backward(T g, T y, T threshold) { return y > threshold ? g : T(0); }
template <typename T> TR_HD T abs(T x) { return x < T(0) ? -x : x; }
// sign(x) in {-1, 0, 1}; sign(0) = sign(-0) = sign(nan) = 0, as in torch 1.13
template <typename T> TR_HD T sign(T x) { return (x > T(0)) ? T(1) : ((x < T(0)) ? T(-1) : T(0)); }
template <typename T> TR_HD T exp(T x) {
  using std::exp;
  return exp(x);
}
template <typename T> TR_HD T log(T x) {
  using std::log;
  return log(x);
}
template <typename T> TR_HD T sqrt(T x) {
  using std::sqrt;
  return sqrt(x);
}
template <typename T> TR_HD T rsqrt(T x) {
  using std::sqrt;
  return T(1) / sqrt(x);
}
template <typename T> TR_HD T sin(T x) {
  using std::sin;
  return sin(x);
}
template <typename T> TR_HD T cos(T x) {
  using std::cos;
  return cos(x);
}
template <typename T> TR_HD T erf(T x) {
  using std::erf;
  return erf(x);
}
template <typename T> TR_HD T tanh(T x) {
  using std::tanh;
  return tanh(x);
}
// sigmoid(x) = 1 / (1 + e^-x)
template <typename T> TR_HD T sigmoid(T x) {
  using std::exp;
  return T(1) / (T(1) + exp(-x));
}
template <typename T> TR_HD T relu(T x) { return (x > T(0)) ? x : ((x != x) ? x : T(0)); }
// gelu(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))
template <typename T> TR_HD T gelu_erf(T x) {
  using std::erf;
  return T(0.5) * x * (T(1) + erf(x * T(0.70710678118654752440)));
}
// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
template <typename T> TR_HD T gelu_tanh(T x) {
  using std::tanh;
  const T k = T(0.79788456080286535588);
  return T(0.5) * x * (T(1) + tanh(k * (x + T(0.044715) * x * x * x)));
}
// gelu's backward, g gelu'(x) (torch's gelu_backward):
//   erf form  gelu'(x) = Phi(x) + x phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2, phi(x) = e^(-x^2/2) / sqrt(2 pi)
//   tanh form t = tanh(k (x + c x^3)), gelu'(x) = (1 + t) / 2 + x (1 - t^2) k (1 + 3 c x^2) / 2
template <typename T> TR_HD T gelu_backward_erf(T g, T x) {
  using std::erf;
  using std::exp;
  const T cdf = T(0.5) * (T(1) + erf(x * T(0.70710678118654752440)));
  const T pdf = exp(T(-0.5) * x * x) * T(0.39894228040143267794);
  return g * (cdf + x * pdf);
}
template <typename T> TR_HD T gelu_backward_tanh(T g, T x) {
  using std::tanh;
  const T k = T(0.79788456080286535588), c = T(0.044715);
  const T t = tanh(k * (x + c * x * x * x));
  return g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * k * (T(1) + T(3) * c * x * x));
}
// silu(x) = x * sigmoid(x)
template <typename T> TR_HD T silu(T x) { return x * sigmoid(x); }
// softplus(x) = log(1 + e^(beta x)) / beta, linear above threshold
template <typename T> TR_HD T softplus(T x, T beta, T threshold) {
  using std::exp;
  using std::log1p;
  return (x * beta > threshold) ? x : log1p(exp(x * beta)) / beta;
}
template <typename T> TR_HD T clamp(T x, T lo, T hi, bool has_lo, bool has_hi) {
  if (x != x) return x;
  if (has_lo && x < lo) x = lo;
  if (has_hi && x > hi) x = hi;
  return x;
}

// ---- predicates: bool of x in its compute type ----
// x == 0, compared in f32 (as the kernels always have: a double below f32's range counts as 0)
template <typename T> TR_HD bool logical_not(T x) { return !(float(x) != 0.0f); }
template <typename T> TR_HD bool isnan(T x) { return x != x; }
// not inf and not NaN; integers are always finite
template <typename T> TR_HD bool isfinite(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    using std::isfinite;
    return isfinite(x);
  } else {
    return true;
  }
}

}  // namespace tr::math
