// CPU kernels of the pointwise ops: out = f(in...) elementwise with broadcasting.
#include "ops/cpu/loops.h"
#include "ops/cpu/vec_math.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "ops/scalar_math.h"

namespace tr::cpu {

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  Shape r(shape.size(), 0);
  int64_t off = int64_t(shape.size()) - t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) r[d + off] = t.size(d) == 1 ? 0 : t.stride(d);
  return r;
}

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

// Unary op y = EXPR(x) computed in acc_t, over the dtypes of DISPATCH (TR_DISPATCH_FLOAT or
// TR_DISPATCH_NUMERIC); PRE reads parameters from attrs `a` once, before the loop.
#define TR_CPU_UNARY_DEF(FN, NAME, DISPATCH, PRE, EXPR)                                       \
  void FN(const Ins& in, Outs& out, const Attrs& a) {                                         \
    DISPATCH(in[0].dtype(), #NAME, [&] {                                                      \
      using A = acc_t<scalar_t>;                                                              \
      PRE;                                                                                    \
      elementwise<scalar_t, scalar_t>(out[0], {in[0]}, [=](scalar_t xs) {                    \
        A x = A(xs);                                                                          \
        return scalar_t(EXPR);                                                                \
      });                                                                                     \
    });                                                                                       \
  }
#define TR_CPU_UNARY_P(NAME, DISPATCH, PRE, EXPR)     \
  TR_CPU_UNARY_DEF(NAME##_cpu, NAME, DISPATCH, PRE, EXPR) \
  TR_REGISTER_KERNEL(NAME, CPU, NAME##_cpu);
// f32 contiguous goes through glibc's vectorised functions (vec_math.h); the rest is scalar.
#define TR_CPU_UNARY_FLOAT_VEC(NAME, EXPR, F8)                                          \
  TR_CPU_UNARY_DEF(NAME##_scalar_cpu, NAME, TR_DISPATCH_FLOAT, (void)a, EXPR)           \
  void NAME##_cpu(const Ins& in, Outs& out, const Attrs& a) {                           \
    if (vec_f32_ok(in[0], out[0]))                                                      \
      map_f32x8(in[0].data_ptr<float>(), out[0].data_ptr<float>(), in[0].numel(), F8);  \
    else                                                                                \
      NAME##_scalar_cpu(in, out, a);                                                    \
  }                                                                                     \
  TR_REGISTER_KERNEL(NAME, CPU, NAME##_cpu);
#define TR_CPU_UNARY_FLOAT(NAME, EXPR) TR_CPU_UNARY_P(NAME, TR_DISPATCH_FLOAT, (void)a, EXPR)
#define TR_CPU_UNARY_FLOAT_P(NAME, PRE, EXPR) TR_CPU_UNARY_P(NAME, TR_DISPATCH_FLOAT, PRE, EXPR)
#define TR_CPU_UNARY_NUMERIC(NAME, EXPR) TR_CPU_UNARY_P(NAME, TR_DISPATCH_NUMERIC, (void)a, EXPR)

#define TR_CPU_BINARY_NUMERIC(NAME, EXPR) TR_CPU_BINARY_NUMERIC_P(NAME, (void)attrs, EXPR)
#define TR_CPU_BINARY_NUMERIC_P(NAME, PRE, EXPR)                                              \
  void NAME##_cpu(const Ins& in, Outs& out, const Attrs& attrs) {                             \
    TR_DISPATCH_NUMERIC(out[0].dtype(), #NAME, [&] {                                          \
      using A = acc_t<scalar_t>;                                                              \
      PRE;                                                                                    \
      elementwise<scalar_t, scalar_t, scalar_t>(out[0], {in[0], in[1]},                       \
                                                [=](scalar_t as, scalar_t bs) {               \
                                                  A x = A(as), y = A(bs);                     \
                                                  return scalar_t(EXPR);                      \
                                                });                                           \
    });                                                                                       \
  }                                                                                           \
  TR_REGISTER_KERNEL(NAME, CPU, NAME##_cpu);

#define TR_CPU_COMPARE(NAME, OP)                                                              \
  void NAME##_cpu(const Ins& in, Outs& out, const Attrs&) {                                   \
    TR_DISPATCH_ALL(in[0].dtype(), #NAME, [&] {                                               \
      using A = acc_t<scalar_t>;                                                              \
      elementwise<bool, scalar_t, scalar_t>(out[0], {in[0], in[1]},                           \
                                            [](scalar_t a, scalar_t b) { return A(a) OP A(b); }); \
    });                                                                                       \
  }                                                                                           \
  TR_REGISTER_KERNEL(NAME, CPU, NAME##_cpu);

TR_CPU_UNARY_NUMERIC(neg, math::neg(x))
TR_CPU_UNARY_NUMERIC(abs, math::abs(x))
TR_CPU_UNARY_NUMERIC(sign, math::sign(x))
TR_CPU_UNARY_NUMERIC(relu, math::relu(x))
TR_CPU_UNARY_FLOAT_VEC(exp, math::exp(x), exp8)
TR_CPU_UNARY_FLOAT_VEC(log, math::log(x), log8)
TR_CPU_UNARY_FLOAT(sqrt, math::sqrt(x))
TR_CPU_UNARY_FLOAT(rsqrt, math::rsqrt(x))
TR_CPU_UNARY_FLOAT(sin, math::sin(x))
TR_CPU_UNARY_FLOAT(cos, math::cos(x))
TR_CPU_UNARY_FLOAT(erf, math::erf(x))
TR_CPU_UNARY_FLOAT_VEC(tanh, math::tanh(x), tanh8)
TR_CPU_UNARY_FLOAT_VEC(sigmoid, math::sigmoid(x), sigmoid8)
TR_CPU_UNARY_FLOAT_VEC(silu, math::silu(x), silu8)
TR_CPU_UNARY_FLOAT_P(gelu, const bool tanh_form = a.s("approximate") == "tanh",
                     (tanh_form ? math::gelu_tanh(x) : math::gelu_erf(x)))
TR_CPU_UNARY_FLOAT_P(softplus, const A beta = A(a.f("beta")); const A thr = A(a.f("threshold")),
                     math::softplus(x, beta, thr))

void clamp_cpu(const Ins& in, Outs& out, const Attrs& a) {
  TR_DISPATCH_NUMERIC(in[0].dtype(), "clamp", [&] {
    using A = acc_t<scalar_t>;
    const A lo = A(a.f("min")), hi = A(a.f("max"));
    const bool has_lo = a.b("has_min"), has_hi = a.b("has_max");
    elementwise<scalar_t, scalar_t>(out[0], {in[0]}, [=](scalar_t xs) {
      return scalar_t(math::clamp(A(xs), lo, hi, has_lo, has_hi));
    });
  });
}
TR_REGISTER_KERNEL(clamp, CPU, clamp_cpu);

TR_CPU_BINARY_NUMERIC_P(add, const A alpha = A(attrs.f("alpha")), math::add(x, y, alpha))
TR_CPU_BINARY_NUMERIC_P(sub, const A alpha = A(attrs.f("alpha")), math::sub(x, y, alpha))
TR_CPU_BINARY_NUMERIC(mul, math::mul(x, y))
TR_CPU_BINARY_NUMERIC(div, math::div(x, y))
// a scalar exponent takes torch's special cases (sqrt for 0.5, products for 2 and 3)
TR_CPU_BINARY_NUMERIC_P(pow, const bool scalar_exp = in[1].dim() == 0,
                        (scalar_exp ? math::pow_scalar(x, y) : math::pow(x, y)))
TR_CPU_BINARY_NUMERIC(maximum, math::maximum(x, y))
TR_CPU_BINARY_NUMERIC(minimum, math::minimum(x, y))

// g where y > threshold, else 0
TR_CPU_BINARY_NUMERIC_P(threshold_backward, const A th = A(attrs.f("threshold")), y > th ? x : A(0))

TR_CPU_COMPARE(eq, ==)
TR_CPU_COMPARE(ne, !=)
TR_CPU_COMPARE(lt, <)
TR_CPU_COMPARE(le, <=)
TR_CPU_COMPARE(gt, >)
TR_CPU_COMPARE(ge, >=)

void logical_and_cpu(const Ins& in, Outs& out, const Attrs&) {
  Tensor a = in[0].dtype() == DType::Bool ? in[0] : in[0] != wrap_scalar(0, in[0].dtype());
  Tensor b = in[1].dtype() == DType::Bool ? in[1] : in[1] != wrap_scalar(0, in[1].dtype());
  elementwise<bool, bool, bool>(out[0], {a, b}, [](bool x, bool y) { return x && y; });
}
TR_REGISTER_KERNEL(logical_and, CPU, logical_and_cpu);

void logical_not_cpu(const Ins& in, Outs& out, const Attrs&) {
  TR_DISPATCH_ALL(in[0].dtype(), "logical_not", [&] {
    elementwise<bool, scalar_t>(out[0], {in[0]}, [](scalar_t x) { return !(float(x) != 0.0f); });
  });
}
TR_REGISTER_KERNEL(logical_not, CPU, logical_not_cpu);

void isnan_cpu(const Ins& in, Outs& out, const Attrs&) {
  TR_DISPATCH_ALL(in[0].dtype(), "isnan", [&] {
    using A = acc_t<scalar_t>;
    elementwise<bool, scalar_t>(out[0], {in[0]}, [](scalar_t x) { return A(x) != A(x); });
  });
}
TR_REGISTER_KERNEL(isnan, CPU, isnan_cpu);

void isfinite_cpu(const Ins& in, Outs& out, const Attrs&) {
  TR_DISPATCH_ALL(in[0].dtype(), "isfinite", [&] {
    using A = acc_t<scalar_t>;
    elementwise<bool, scalar_t>(out[0], {in[0]}, [](scalar_t x) {
      if constexpr (std::is_floating_point_v<A>) return std::isfinite(A(x));
      else return true;
    });
  });
}
TR_REGISTER_KERNEL(isfinite, CPU, isfinite_cpu);

void where_cpu(const Ins& in, Outs& out, const Attrs&) {
  TR_DISPATCH_ALL(out[0].dtype(), "where", [&] {
    elementwise<scalar_t, bool, scalar_t, scalar_t>(out[0], {in[0], in[1], in[2]},
                                                     [](bool c, scalar_t a, scalar_t b) { return c ? a : b; });
  });
}
TR_REGISTER_KERNEL(where, CPU, where_cpu);

// out = in converted to out's dtype (also the body of copy_ between dtypes)
void cast_into(const Tensor& out, const Tensor& in) {
  TR_DISPATCH_ALL(out.dtype(), "cast", [&] {
    using O = scalar_t;
    TR_DISPATCH_ALL(in.dtype(), "cast", [&] {
      elementwise<O, scalar_t>(out, {in}, [](scalar_t x) { return convert<O>(x); });
    });
  });
}
void cast_cpu(const Ins& in, Outs& out, const Attrs&) { cast_into(out[0], in[0]); }
TR_REGISTER_KERNEL(cast, CPU, cast_cpu);

// copy_(dst, src): inputs {dst, src}, no outputs; src broadcasts to dst.
void copy_cpu(const Ins& in, Outs&, const Attrs&) {
  const Tensor &dst = in[0], &src = in[1];
  if (dst.dtype() == src.dtype()) {
    TR_DISPATCH_ALL(dst.dtype(), "copy_", [&] {
      elementwise<scalar_t, scalar_t>(dst, {src}, [](scalar_t x) { return x; });
    });
  } else {
    cast_into(dst, src);
  }
}
TR_REGISTER_KERNEL(copy_, CPU, copy_cpu);

void fill_cpu(const Ins& in, Outs&, const Attrs& a) {
  const Tensor& dst = in[0];
  double v = a.f("value");
  TR_DISPATCH_ALL(dst.dtype(), "fill_", [&] {
    scalar_t s = convert<scalar_t>(v);
    if (dst.is_contiguous()) {
      scalar_t* p = dst.data_ptr<scalar_t>();
      parallel_for(dst.numel(), kGrain, [&](int64_t b, int64_t e) { std::fill(p + b, p + e, s); });
    } else {
      elementwise<scalar_t>(dst, {}, [s]() { return s; });
    }
  });
}
TR_REGISTER_KERNEL(fill_, CPU, fill_cpu);

}  // namespace
}  // namespace tr::cpu
