// Pointwise ops: the ops of the tables unary_ops.def, binary_ops.def, compare_ops.def and
// predicate_ops.def (promotion, autocast and shape rule from their lines; the backward of each
// differentiable one written here, beside its line's formula), where, threshold_backward, cast.
#include <cmath>
#include "ops/backends.h"
#include "ops/infer.h"
#include "ops/op_tables.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

namespace {

// the broadcast shape in the inputs' common dtype (they differ only where the kernel reads mixed floats)
std::vector<TensorSpec> broadcast_infer(const std::vector<Tensor>& in, const Attrs&) {
  Shape s = in[0].sizes();
  DType t = in[0].dtype();
  for (size_t i = 1; i < in.size(); ++i) {
    s = broadcast_shapes(s, in[i].sizes(), "");
    t = promote_types(t, in[i].dtype());
  }
  return {{s, t}};
}
std::vector<TensorSpec> bool_infer(const std::vector<Tensor>& in, const Attrs& a) {
  auto r = broadcast_infer(in, a);
  r[0].dtype = DType::Bool;
  return r;
}

// What a backward reads of the forward, so the node keeps it: nothing, the inputs or the outputs.
enum class Keeps { Nothing, Inputs, Outputs };

void keep(OpDef& d, Keeps k) {
  d.save_inputs = k == Keeps::Inputs;
  d.save_outputs = k == Keeps::Outputs;
}
// A unary table op: NUMERIC ops take their input as it is, FLOAT ops promote integers to f32.
void unary(OpDef& d, DtypeSet s, amp::CastPolicy autocast, BackwardFn bw, Keeps k) {
  d.num_inputs = 1;
  d.promote = s == DtypeSet::FLOAT ? Promote::CommonFloat : Promote::None;
  d.autocast = autocast;
  d.infer = infer_same;
  d.backward = bw;
  d.pointwise = true;
  keep(d, k);
}
// A binary table op: inputs promoted to their result_type (and FLOAT ops' integers to f32).
void binary(OpDef& d, DtypeSet s, amp::CastPolicy autocast, BackwardFn bw, Keeps k) {
  d.num_inputs = 2;
  d.promote = s == DtypeSet::FLOAT ? Promote::CommonFloat : Promote::Common;
  d.cuda_reads_mixed_floats = true;  // ops/cuda/pointwise.cpp: binary()
  d.autocast = autocast;
  d.infer = broadcast_infer;
  d.backward = bw;
  d.pointwise = true;
  keep(d, k);
}
void predicate(OpDef& d, int n) {
  d.num_inputs = n;
  d.promote = n == 2 ? Promote::Common : Promote::None;
  d.infer = bool_infer;
  d.differentiable = false;
  d.pointwise = false;
}

// The backward of a table op and what it keeps of the forward (registered with the op's line):
//   TR_BACKWARD(exp, Keeps::Outputs) { return {G(c) * c.outputs[0]}; }
#define TR_BACKWARD(NAME, KEEPS)        \
  constexpr Keeps NAME##_keeps = KEEPS; \
  std::vector<Tensor> NAME##_backward(const BackwardContext& c)

// ---- binary (binary_ops.def) ----
// (an input that needs no gradient gets none: a constant mask added to attention scores would
// otherwise cost a reduction of the scores to the mask's shape every step)
TR_BACKWARD(add, Keeps::Nothing) {
  double alpha = c.attrs.f("alpha");
  Tensor ga, gb;
  if (c.needs_input_grad[0]) ga = sum_to(G(c), in_shape(c, 0));
  if (c.needs_input_grad[1]) gb = sum_to(alpha == 1.0 ? G(c) : G(c) * alpha, in_shape(c, 1));
  return {ga, gb};
}
TR_BACKWARD(sub, Keeps::Nothing) {
  Tensor ga, gb;
  if (c.needs_input_grad[0]) ga = sum_to(G(c), in_shape(c, 0));
  if (c.needs_input_grad[1]) gb = sum_to(G(c) * -c.attrs.f("alpha"), in_shape(c, 1));
  return {ga, gb};
}
TR_BACKWARD(mul, Keeps::Inputs) {
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  Tensor ga, gb;
  if (c.needs_input_grad[0]) ga = sum_to(G(c) * b, in_shape(c, 0));
  if (c.needs_input_grad[1]) gb = sum_to(G(c) * a, in_shape(c, 1));
  return {ga, gb};
}
TR_BACKWARD(div, Keeps::Inputs) {
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  Tensor ga, gb;
  if (c.needs_input_grad[0]) ga = sum_to(G(c) / b, in_shape(c, 0));
  if (c.needs_input_grad[1]) gb = sum_to(-G(c) * a / (b * b), in_shape(c, 1));
  return {ga, gb};
}
TR_BACKWARD(pow, Keeps::Inputs) {
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  Tensor ga, gb;
  // d/da a^b = b a^(b-1), taken as 0 where b == 0 (torch's pow_backward_self)
  if (c.needs_input_grad[0]) ga = sum_to(where(b == 0.0, zeros_like(G(c)), G(c) * b * pow(a, b - 1.0)), in_shape(c, 0));
  // d/db a^b = a^b log a, taken as 0 where a == 0 and b >= 0 (torch's pow_backward_exponent)
  if (c.needs_input_grad[1]) {
    Tensor r = pow(a, b) * log(a);
    gb = sum_to(G(c) * where(logical_and(a == 0.0, b >= 0.0), zeros_like(r), r), in_shape(c, 1));
  }
  return {ga, gb};
}
std::vector<Tensor> extremum_backward(const BackwardContext& c, bool is_max) {
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  // The gradient goes to the larger (smaller) input; ties split it evenly, as torch does.
  Tensor wa = cast(is_max ? (a > b) : (a < b), G(c).dtype()) + cast(a == b, G(c).dtype()) * 0.5;
  return {sum_to(G(c) * wa, in_shape(c, 0)), sum_to(G(c) * (1.0 - wa), in_shape(c, 1))};
}
TR_BACKWARD(maximum, Keeps::Inputs) { return extremum_backward(c, true); }
TR_BACKWARD(minimum, Keeps::Inputs) { return extremum_backward(c, false); }

// ---- unary (unary_ops.def) ----
TR_BACKWARD(neg, Keeps::Nothing) { return {-G(c)}; }
TR_BACKWARD(abs, Keeps::Inputs) { return {G(c) * sign(c.inputs[0])}; }
TR_BACKWARD(sign, Keeps::Nothing) { return {zeros_like(G(c))}; }
// threshold_backward: the gradient passes where the result is positive
TR_BACKWARD(relu, Keeps::Outputs) { return {threshold_backward(G(c), c.outputs[0], 0.0)}; }
TR_BACKWARD(exp, Keeps::Outputs) { return {G(c) * c.outputs[0]}; }
TR_BACKWARD(log, Keeps::Inputs) { return {G(c) / c.inputs[0]}; }
TR_BACKWARD(sqrt, Keeps::Outputs) { return {G(c) / (2.0 * c.outputs[0])}; }
// d/dx x^-1/2 = -1/2 x^-3/2 = -1/2 y^3
TR_BACKWARD(rsqrt, Keeps::Outputs) {
  const Tensor& y = c.outputs[0];
  return {G(c) * (y * y * y) * -0.5};
}
TR_BACKWARD(sin, Keeps::Inputs) { return {G(c) * cos(c.inputs[0])}; }
TR_BACKWARD(cos, Keeps::Inputs) { return {-G(c) * sin(c.inputs[0])}; }
// d/dx erf(x) = 2/sqrt(pi) e^(-x^2)
TR_BACKWARD(erf, Keeps::Inputs) {
  const Tensor& x = c.inputs[0];
  return {G(c) * exp(-(x * x)) * 1.1283791670955126};
}
TR_BACKWARD(tanh, Keeps::Outputs) {
  const Tensor& y = c.outputs[0];
  return {G(c) * (1.0 - y * y)};
}
TR_BACKWARD(sigmoid, Keeps::Outputs) {
  const Tensor& y = c.outputs[0];
  return {G(c) * y * (1.0 - y)};
}
// y' = s (1 + x (1 - s)), s = sigmoid(x)
TR_BACKWARD(silu, Keeps::Inputs) {
  const Tensor& x = c.inputs[0];
  Tensor s = sigmoid(x);
  return {G(c) * s * (1.0 + x * (1.0 - s))};
}
TR_BACKWARD(clamp, Keeps::Inputs) {
  const Tensor& x = c.inputs[0];
  Tensor keep = ones_like(x).to(DType::Bool);
  if (c.attrs.b("has_min")) keep = logical_and(keep, x >= c.attrs.f("min"));
  if (c.attrs.b("has_max")) keep = logical_and(keep, x <= c.attrs.f("max"));
  return {where(keep, G(c), zeros_like(G(c)))};
}
TR_BACKWARD(gelu, Keeps::Inputs) { return {gelu_backward(G(c), c.inputs[0], c.attrs.s("approximate"))}; }

// g gelu'(x) as composite ops: where the device has no gelu_backward kernel, and its unfused spec.
Tensor gelu_backward_composite(const Tensor& g, const Tensor& x, const std::string& approximate) {
  if (approximate == "tanh") {
    // u = k (x + 0.044715 x^3); y = 0.5 x (1 + tanh u)
    // y' = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 * 0.044715 x^2)
    const double k = 0.7978845608028654;
    Tensor t = tanh((x + x * x * x * 0.044715) * k);
    Tensor dy = (1.0 + t) * 0.5 + x * 0.5 * (1.0 - t * t) * ((x * x * (3.0 * 0.044715) + 1.0) * k);
    return g * dy;
  }
  // y' = Phi(x) + x phi(x)
  Tensor cdf = (erf(x * 0.7071067811865476) + 1.0) * 0.5;
  Tensor pdf = exp(x * x * -0.5) * 0.3989422804014327;
  return g * (cdf + x * pdf);
}

// y' = sigmoid(beta x), and 1 where beta x > threshold
TR_BACKWARD(softplus, Keeps::Inputs) {
  const Tensor& x = c.inputs[0];
  double beta = c.attrs.f("beta"), thr = c.attrs.f("threshold");
  Tensor bx = x * beta;
  return {where(bx > thr, G(c), G(c) * sigmoid(bx))};
}

}  // namespace

// One fused pass where the device has the kernel (a NaN or inf gradient under the mask gives 0, as
// torch's), else the composite mask product.
Tensor threshold_backward(const Tensor& g, const Tensor& y, double threshold) {
  if (has_kernel("threshold_backward", g.device()))
    return dispatch1("threshold_backward", {g, y}, {{"threshold", threshold}});
  return g * cast(y > threshold, g.dtype());
}

// ---- the table ops ----
#define TR_UNARY_OP(NAME, OP, DTYPES, AUTOCAST, PARAMS, FORMULA, F32X8) \
  TR_REGISTER_OP(NAME) { unary(d, DtypeSet::DTYPES, amp::CastPolicy::AUTOCAST, NAME##_backward, NAME##_keeps); }
#include "ops/unary_ops.def"
#define TR_BINARY_OP(NAME, OP, DTYPES, AUTOCAST, PARAMS, FORMULA) \
  TR_REGISTER_OP(NAME) { binary(d, DtypeSet::DTYPES, amp::CastPolicy::AUTOCAST, NAME##_backward, NAME##_keeps); }
#include "ops/binary_ops.def"
#define TR_COMPARE_OP(NAME, OP, OPERATOR) \
  TR_REGISTER_OP(NAME) { predicate(d, 2); }
#include "ops/compare_ops.def"
#define TR_PREDICATE_OP(NAME, OP, FORMULA) \
  TR_REGISTER_OP(NAME) { predicate(d, 1); }
#include "ops/predicate_ops.def"

// ---- the rest ----
TR_REGISTER_OP(where) {
  d.num_inputs = 3;
  d.infer = broadcast_infer;
  d.pointwise = true;
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor& cond = c.inputs[0];
    Tensor z = zeros_like(G(c));
    return {Tensor(), sum_to(where(cond, G(c), z), in_shape(c, 1)), sum_to(where(cond, z, G(c)), in_shape(c, 2))};
  };
}
// x0 && x1 (non-bool inputs count as x != 0)
TR_REGISTER_OP(logical_and) {
  predicate(d, 2);
  d.promote = Promote::None;
}
// (g, y) -> g where y > threshold, else 0 (attr threshold; torch.ops.aten.threshold_backward).
// Linear in g with the same mask; y gets no gradient (the mask is piecewise constant).
TR_REGISTER_OP(threshold_backward) {
  binary(
      d, DtypeSet::NUMERIC, amp::CastPolicy::None,
      [](const BackwardContext& c) -> std::vector<Tensor> {
        return {sum_to(threshold_backward(G(c), c.inputs[1], c.attrs.f("threshold")), in_shape(c, 0)), Tensor()};
      },
      Keeps::Inputs);
}
// (g, x) -> g gelu'(x) (attr approximate; torch.ops.aten.gelu_backward). Its own gradient:
// d/dg = gelu'(x), d/dx = g gelu''(x), with
//   erf form  gelu''(x) = phi(x) (2 - x^2)
//   tanh form gelu''(x) = (1 - t^2) (u' - x t u'^2 + x u'' / 2), u = k (x + c x^3), u' = k (1 + 3 c x^2), u'' = 6 k c x
TR_REGISTER_OP(gelu_backward) {
  binary(
      d, DtypeSet::FLOAT, amp::CastPolicy::None,
      [](const BackwardContext& c) -> std::vector<Tensor> {
        const Tensor &g = c.inputs[0], &x = c.inputs[1];
        const std::string approx = c.attrs.s("approximate");
        Tensor gg, gx;
        if (c.needs_input_grad[0]) gg = sum_to(gelu_backward(G(c), x, approx), in_shape(c, 0));
        if (c.needs_input_grad[1]) {
          Tensor d2;
          if (approx == "tanh") {
            const double k = 0.7978845608028654, cc = 0.044715;
            Tensor t = tanh((x + x * x * x * cc) * k);
            Tensor u1 = (x * x * (3.0 * cc) + 1.0) * k;
            d2 = (1.0 - t * t) * (u1 - x * t * u1 * u1 + x * x * (3.0 * k * cc));
          } else {
            d2 = exp(x * x * -0.5) * 0.3989422804014327 * (2.0 - x * x);
          }
          gx = sum_to(G(c) * g * d2, in_shape(c, 1));
        }
        return {gg, gx};
      },
      Keeps::Inputs);
}
TR_REGISTER_OP(cast) {
  d.num_inputs = 1;
  d.pointwise = true;
  d.save_inputs = false;
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    return {{in[0].sizes(), DType(a.i("dtype"))}};
  };
  // the node casts the gradient back to the input dtype
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> { return {G(c)}; };
}

// ---- API ----
// the table ops without an API of their own
#define TR_UNARY_OP(NAME, ...) \
  Tensor NAME(const Tensor& x) { return dispatch1(#NAME, {x}); }
#define TR_UNARY_OP_OWN_API(...)
#include "ops/unary_ops.def"
#define TR_BINARY_OP(NAME, ...) \
  Tensor NAME(const Tensor& a, const Tensor& b) { return dispatch1(#NAME, {a, b}); }
#define TR_BINARY_OP_OWN_API(...)
#include "ops/binary_ops.def"
#define TR_COMPARE_OP(NAME, ...) \
  Tensor NAME(const Tensor& a, const Tensor& b) { return dispatch1(#NAME, {a, b}); }
#include "ops/compare_ops.def"
#define TR_PREDICATE_OP(NAME, ...) \
  Tensor NAME(const Tensor& x) { return dispatch1(#NAME, {x}); }
#include "ops/predicate_ops.def"

Tensor add(const Tensor& a, const Tensor& b, double alpha) { return dispatch1("add", {a, b}, {{"alpha", alpha}}); }
Tensor sub(const Tensor& a, const Tensor& b, double alpha) { return dispatch1("sub", {a, b}, {{"alpha", alpha}}); }
Tensor div(const Tensor& a, const Tensor& b) {
  // true division: integer inputs give the default float dtype
  if (!is_floating(result_type({a, b}))) return dispatch1("div", {cast(a, DType::F32), cast(b, DType::F32)});
  return dispatch1("div", {a, b});
}
Tensor pow(const Tensor& a, const Tensor& b) { return dispatch1("pow", {a, b}); }
Tensor pow(const Tensor& a, double e) { return dispatch1("pow", {a, wrap_scalar(e, DType::F64)}); }
Tensor pow(double base, const Tensor& e) { return dispatch1("pow", {wrap_scalar(base, DType::F64), e}); }
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  DType t = result_type({a, b});
  Tensor c = cond.dtype() == DType::Bool ? cond : cast(cond, DType::Bool);
  auto as = [&](const Tensor& x) {
    return x.dtype() == t ? x : (x.is_wrapped_number() ? wrap_scalar(x.item(), t) : cast(x, t));
  };
  return dispatch1("where", {c, as(a), as(b)});
}
Tensor logical_and(const Tensor& a, const Tensor& b) { return dispatch1("logical_and", {a, b}); }

static Tensor ws(double v) { return wrap_scalar(v, DType::F64); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, double b) { return add(a, ws(b)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, ws(b)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, ws(b)); }
Tensor operator/(const Tensor& a, double b) { return div(a, ws(b)); }
Tensor operator+(double a, const Tensor& b) { return add(ws(a), b); }
Tensor operator-(double a, const Tensor& b) { return sub(ws(a), b); }
Tensor operator*(double a, const Tensor& b) { return mul(ws(a), b); }
Tensor operator/(double a, const Tensor& b) { return div(ws(a), b); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator<(const Tensor& a, double b) { return lt(a, ws(b)); }
Tensor operator<=(const Tensor& a, double b) { return le(a, ws(b)); }
Tensor operator>(const Tensor& a, double b) { return gt(a, ws(b)); }
Tensor operator>=(const Tensor& a, double b) { return ge(a, ws(b)); }
Tensor operator==(const Tensor& a, double b) { return eq(a, ws(b)); }
Tensor operator!=(const Tensor& a, double b) { return ne(a, ws(b)); }

// One fused pass where the device has the kernel (and fusion is on: backends.h).
Tensor gelu_backward(const Tensor& g, const Tensor& x, const std::string& approximate) {
  if (backends::fusion().enabled && has_kernel("gelu_backward", g.device()))
    return dispatch1("gelu_backward", {g, x}, {{"approximate", approximate}});
  return gelu_backward_composite(g, x, approximate);
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  TR_CHECK(approximate == "none" || approximate == "tanh", "gelu: approximate must be 'none' or 'tanh', got '",
           approximate, "'");
  return dispatch1("gelu", {x}, {{"approximate", approximate}});
}
Tensor softplus(const Tensor& x, double beta, double threshold) {
  return dispatch1("softplus", {x}, {{"beta", beta}, {"threshold", threshold}});
}
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  TR_CHECK(lo || hi, "clamp: at least one of min and max must be given");
  return dispatch1(
      "clamp", {x},
      {{"min", lo.value_or(0.0)}, {"max", hi.value_or(0.0)}, {"has_min", bool(lo)}, {"has_max", bool(hi)}});
}
Tensor cast(const Tensor& x, DType t) {
  if (x.dtype() == t) return x;
  return dispatch1("cast", {x}, {{"dtype", int64_t(t)}});
}

}  // namespace tr
