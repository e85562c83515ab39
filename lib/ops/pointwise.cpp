// Pointwise ops: shape rule (broadcasting), dtype rule, and backward formulas.
#include <cmath>
#include "ops/infer.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

namespace {

std::vector<TensorSpec> broadcast_infer(const std::vector<Tensor>& in, const Attrs&) {
  Shape s = in[0].sizes();
  for (size_t i = 1; i < in.size(); ++i) s = broadcast_shapes(s, in[i].sizes(), "");
  return {{s, in.back().dtype()}};
}
std::vector<TensorSpec> bool_infer(const std::vector<Tensor>& in, const Attrs& a) {
  auto r = broadcast_infer(in, a);
  r[0].dtype = DType::Bool;
  return r;
}

void unary(OpDef& d, Promote p, BackwardFn bw, bool save_out = false) {
  d.num_inputs = 1;
  d.promote = p;
  d.infer = infer_same;
  d.backward = bw;
  d.pointwise = true;
  d.save_inputs = !save_out;
  d.save_outputs = save_out;
}
void binary(OpDef& d, BackwardFn bw, bool save_inputs = true) {
  d.num_inputs = 2;
  d.promote = Promote::Common;
  d.infer = broadcast_infer;
  d.backward = bw;
  d.pointwise = true;
  d.save_inputs = save_inputs;
}
void predicate(OpDef& d, int n) {
  d.num_inputs = n;
  d.promote = n == 2 ? Promote::Common : Promote::None;
  d.infer = bool_infer;
  d.differentiable = false;
  d.pointwise = false;
}

const Tensor& G(const BackwardContext& c) { return c.grads[0]; }
const Shape& in_shape(const BackwardContext& c, int i) { return c.input_specs[i].sizes; }

}  // namespace

// ---- binary ----
TR_REGISTER_OP(add) {
  binary(d, [](const BackwardContext& c) -> std::vector<Tensor> {
    double alpha = c.attrs.f("alpha");
    return {sum_to(G(c), in_shape(c, 0)), sum_to(alpha == 1.0 ? G(c) : G(c) * alpha, in_shape(c, 1))};
  }, false);
}
TR_REGISTER_OP(sub) {
  binary(d, [](const BackwardContext& c) -> std::vector<Tensor> {
    return {sum_to(G(c), in_shape(c, 0)), sum_to(G(c) * -c.attrs.f("alpha"), in_shape(c, 1))};
  }, false);
}
TR_REGISTER_OP(mul) {
  binary(d, [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor &a = c.inputs[0], &b = c.inputs[1];
    Tensor ga, gb;
    if (c.needs_input_grad[0]) ga = sum_to(G(c) * b, in_shape(c, 0));
    if (c.needs_input_grad[1]) gb = sum_to(G(c) * a, in_shape(c, 1));
    return {ga, gb};
  });
}
TR_REGISTER_OP(div) {
  binary(d, [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor &a = c.inputs[0], &b = c.inputs[1];
    Tensor ga, gb;
    if (c.needs_input_grad[0]) ga = sum_to(G(c) / b, in_shape(c, 0));
    if (c.needs_input_grad[1]) gb = sum_to(-G(c) * a / (b * b), in_shape(c, 1));
    return {ga, gb};
  });
}
TR_REGISTER_OP(pow) {
  d.autocast = amp::CastPolicy::Fp32;
  binary(d, [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor &a = c.inputs[0], &b = c.inputs[1];
    Tensor ga, gb;
    // d/da a^b = b a^(b-1), taken as 0 where b == 0 (torch's pow_backward_self)
    if (c.needs_input_grad[0])
      ga = sum_to(where(b == 0.0, zeros_like(G(c)), G(c) * b * pow(a, b - 1.0)), in_shape(c, 0));
    // d/db a^b = a^b log a, taken as 0 where a == 0 and b >= 0 (torch's pow_backward_exponent)
    if (c.needs_input_grad[1]) {
      Tensor r = pow(a, b) * log(a);
      gb = sum_to(G(c) * where(logical_and(a == 0.0, b >= 0.0), zeros_like(r), r), in_shape(c, 1));
    }
    return {ga, gb};
  });
}
static std::vector<Tensor> extremum_backward(const BackwardContext& c, bool is_max) {
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  // The gradient goes to the larger (smaller) input; ties split it evenly, as torch does.
  Tensor wa = cast(is_max ? (a > b) : (a < b), G(c).dtype()) + cast(a == b, G(c).dtype()) * 0.5;
  return {sum_to(G(c) * wa, in_shape(c, 0)), sum_to(G(c) * (1.0 - wa), in_shape(c, 1))};
}
TR_REGISTER_OP(maximum) { binary(d, [](const BackwardContext& c) { return extremum_backward(c, true); }); }
TR_REGISTER_OP(minimum) { binary(d, [](const BackwardContext& c) { return extremum_backward(c, false); }); }
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

// ---- comparisons and predicates (not differentiable) ----
TR_REGISTER_OP(eq) { predicate(d, 2); }
TR_REGISTER_OP(ne) { predicate(d, 2); }
TR_REGISTER_OP(lt) { predicate(d, 2); }
TR_REGISTER_OP(le) { predicate(d, 2); }
TR_REGISTER_OP(gt) { predicate(d, 2); }
TR_REGISTER_OP(ge) { predicate(d, 2); }
TR_REGISTER_OP(logical_and) { predicate(d, 2); d.promote = Promote::None; }
TR_REGISTER_OP(logical_not) { predicate(d, 1); }
TR_REGISTER_OP(isnan) { predicate(d, 1); }
TR_REGISTER_OP(isfinite) { predicate(d, 1); }

// ---- unary ----
TR_REGISTER_OP(neg) { unary(d, Promote::None, [](const BackwardContext& c) -> std::vector<Tensor> { return {-G(c)}; }); d.save_inputs = false; }
TR_REGISTER_OP(abs) { unary(d, Promote::None, [](const BackwardContext& c) -> std::vector<Tensor> { return {G(c) * sign(c.inputs[0])}; }); }
TR_REGISTER_OP(sign) { unary(d, Promote::None, [](const BackwardContext& c) -> std::vector<Tensor> { return {zeros_like(G(c))}; }); d.save_inputs = false; }
TR_REGISTER_OP(exp) { d.autocast = amp::CastPolicy::Fp32; unary(d, Promote::CommonFloat, [](const BackwardContext& c) -> std::vector<Tensor> { return {G(c) * c.outputs[0]}; }, true); }
TR_REGISTER_OP(log) { d.autocast = amp::CastPolicy::Fp32; unary(d, Promote::CommonFloat, [](const BackwardContext& c) -> std::vector<Tensor> { return {G(c) / c.inputs[0]}; }); }
TR_REGISTER_OP(sqrt) { unary(d, Promote::CommonFloat, [](const BackwardContext& c) -> std::vector<Tensor> { return {G(c) / (2.0 * c.outputs[0])}; }, true); }
TR_REGISTER_OP(rsqrt) {
  d.autocast = amp::CastPolicy::Fp32;
  // d/dx x^-1/2 = -1/2 x^-3/2 = -1/2 y^3
  unary(d, Promote::CommonFloat, [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor& y = c.outputs[0];
    return {G(c) * (y * y * y) * -0.5};
  }, true);
}
TR_REGISTER_OP(sin) { unary(d, Promote::CommonFloat, [](const BackwardContext& c) -> std::vector<Tensor> { return {G(c) * cos(c.inputs[0])}; }); }
TR_REGISTER_OP(cos) { unary(d, Promote::CommonFloat, [](const BackwardContext& c) -> std::vector<Tensor> { return {-G(c) * sin(c.inputs[0])}; }); }
TR_REGISTER_OP(erf) {
  // d/dx erf(x) = 2/sqrt(pi) e^(-x^2)
  unary(d, Promote::CommonFloat, [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor& x = c.inputs[0];
    return {G(c) * exp(-(x * x)) * 1.1283791670955126};
  });
}
TR_REGISTER_OP(tanh) {
  unary(d, Promote::CommonFloat, [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor& y = c.outputs[0];
    return {G(c) * (1.0 - y * y)};
  }, true);
}
TR_REGISTER_OP(sigmoid) {
  unary(d, Promote::CommonFloat, [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor& y = c.outputs[0];
    return {G(c) * y * (1.0 - y)};
  }, true);
}
namespace {
// g where y > threshold, else 0: one fused pass where the device has the kernel (a NaN or inf
// gradient under the mask gives 0, as torch's), else the composite mask product.
Tensor threshold_backward(const Tensor& g, const Tensor& y, double threshold) {
  if (has_kernel("threshold_backward", g.device()))
    return dispatch1("threshold_backward", {g, y}, {{"threshold", threshold}});
  return g * cast(y > threshold, g.dtype());
}
}  // namespace

TR_REGISTER_OP(relu) {
  // threshold_backward: the gradient passes where the result is positive
  unary(d, Promote::None, [](const BackwardContext& c) -> std::vector<Tensor> {
    return {threshold_backward(G(c), c.outputs[0], 0.0)};
  }, true);
}
// (g, y) -> g where y > threshold, else 0 (attr threshold; torch.ops.aten.threshold_backward).
// Linear in g with the same mask; y gets no gradient (the mask is piecewise constant).
TR_REGISTER_OP(threshold_backward) {
  binary(d, [](const BackwardContext& c) -> std::vector<Tensor> {
    return {sum_to(threshold_backward(G(c), c.inputs[1], c.attrs.f("threshold")), in_shape(c, 0)), Tensor()};
  });
}
TR_REGISTER_OP(gelu) {
  unary(d, Promote::CommonFloat, [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor& x = c.inputs[0];
    if (c.attrs.s("approximate") == "tanh") {
      // u = k (x + 0.044715 x^3); y = 0.5 x (1 + tanh u)
      // y' = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 * 0.044715 x^2)
      const double k = 0.7978845608028654;
      Tensor t = tanh((x + x * x * x * 0.044715) * k);
      Tensor dy = (1.0 + t) * 0.5 + x * 0.5 * (1.0 - t * t) * ((x * x * (3.0 * 0.044715) + 1.0) * k);
      return {G(c) * dy};
    }
    // y' = Phi(x) + x phi(x)
    Tensor cdf = (erf(x * 0.7071067811865476) + 1.0) * 0.5;
    Tensor pdf = exp(x * x * -0.5) * 0.3989422804014327;
    return {G(c) * (cdf + x * pdf)};
  });
}
TR_REGISTER_OP(silu) {
  // y' = s (1 + x (1 - s)), s = sigmoid(x)
  unary(d, Promote::CommonFloat, [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor& x = c.inputs[0];
    Tensor s = sigmoid(x);
    return {G(c) * s * (1.0 + x * (1.0 - s))};
  });
}
TR_REGISTER_OP(softplus) {
  d.autocast = amp::CastPolicy::Fp32;
  // y' = sigmoid(beta x), and 1 where beta x > threshold
  unary(d, Promote::CommonFloat, [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor& x = c.inputs[0];
    double beta = c.attrs.f("beta"), thr = c.attrs.f("threshold");
    Tensor bx = x * beta;
    return {where(bx > thr, G(c), G(c) * sigmoid(bx))};
  });
}
TR_REGISTER_OP(clamp) {
  unary(d, Promote::None, [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor& x = c.inputs[0];
    Tensor keep = ones_like(x).to(DType::Bool);
    if (c.attrs.b("has_min")) keep = logical_and(keep, x >= c.attrs.f("min"));
    if (c.attrs.b("has_max")) keep = logical_and(keep, x <= c.attrs.f("max"));
    return {where(keep, G(c), zeros_like(G(c)))};
  });
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
Tensor add(const Tensor& a, const Tensor& b, double alpha) { return dispatch1("add", {a, b}, {{"alpha", alpha}}); }
Tensor sub(const Tensor& a, const Tensor& b, double alpha) { return dispatch1("sub", {a, b}, {{"alpha", alpha}}); }
Tensor mul(const Tensor& a, const Tensor& b) { return dispatch1("mul", {a, b}); }
Tensor div(const Tensor& a, const Tensor& b) {
  // true division: integer inputs give the default float dtype
  if (!is_floating(result_type({a, b}))) return dispatch1("div", {cast(a, DType::F32), cast(b, DType::F32)});
  return dispatch1("div", {a, b});
}
Tensor pow(const Tensor& a, const Tensor& b) { return dispatch1("pow", {a, b}); }
Tensor pow(const Tensor& a, double e) { return dispatch1("pow", {a, wrap_scalar(e, DType::F64)}); }
Tensor pow(double base, const Tensor& e) { return dispatch1("pow", {wrap_scalar(base, DType::F64), e}); }
Tensor maximum(const Tensor& a, const Tensor& b) { return dispatch1("maximum", {a, b}); }
Tensor minimum(const Tensor& a, const Tensor& b) { return dispatch1("minimum", {a, b}); }
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  DType t = result_type({a, b});
  Tensor c = cond.dtype() == DType::Bool ? cond : cast(cond, DType::Bool);
  auto as = [&](const Tensor& x) { return x.dtype() == t ? x : (x.is_wrapped_number() ? wrap_scalar(x.item(), t) : cast(x, t)); };
  return dispatch1("where", {c, as(a), as(b)});
}
Tensor eq(const Tensor& a, const Tensor& b) { return dispatch1("eq", {a, b}); }
Tensor ne(const Tensor& a, const Tensor& b) { return dispatch1("ne", {a, b}); }
Tensor lt(const Tensor& a, const Tensor& b) { return dispatch1("lt", {a, b}); }
Tensor le(const Tensor& a, const Tensor& b) { return dispatch1("le", {a, b}); }
Tensor gt(const Tensor& a, const Tensor& b) { return dispatch1("gt", {a, b}); }
Tensor ge(const Tensor& a, const Tensor& b) { return dispatch1("ge", {a, b}); }
Tensor logical_not(const Tensor& a) { return dispatch1("logical_not", {a}); }
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

Tensor neg(const Tensor& x) { return dispatch1("neg", {x}); }
Tensor abs(const Tensor& x) { return dispatch1("abs", {x}); }
Tensor sign(const Tensor& x) { return dispatch1("sign", {x}); }
Tensor exp(const Tensor& x) { return dispatch1("exp", {x}); }
Tensor log(const Tensor& x) { return dispatch1("log", {x}); }
Tensor sqrt(const Tensor& x) { return dispatch1("sqrt", {x}); }
Tensor rsqrt(const Tensor& x) { return dispatch1("rsqrt", {x}); }
Tensor sin(const Tensor& x) { return dispatch1("sin", {x}); }
Tensor cos(const Tensor& x) { return dispatch1("cos", {x}); }
Tensor erf(const Tensor& x) { return dispatch1("erf", {x}); }
Tensor tanh(const Tensor& x) { return dispatch1("tanh", {x}); }
Tensor sigmoid(const Tensor& x) { return dispatch1("sigmoid", {x}); }
Tensor relu(const Tensor& x) { return dispatch1("relu", {x}); }
Tensor gelu(const Tensor& x, const std::string& approximate) {
  TR_CHECK(approximate == "none" || approximate == "tanh", "gelu: approximate must be 'none' or 'tanh', got '",
           approximate, "'");
  return dispatch1("gelu", {x}, {{"approximate", approximate}});
}
Tensor silu(const Tensor& x) { return dispatch1("silu", {x}); }
Tensor softplus(const Tensor& x, double beta, double threshold) {
  return dispatch1("softplus", {x}, {{"beta", beta}, {"threshold", threshold}});
}
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  TR_CHECK(lo || hi, "clamp: at least one of min and max must be given");
  return dispatch1("clamp", {x}, {{"min", lo.value_or(0.0)}, {"max", hi.value_or(0.0)}, {"has_min", bool(lo)},
                                  {"has_max", bool(hi)}});
}
Tensor isnan(const Tensor& x) { return dispatch1("isnan", {x}); }
Tensor isfinite(const Tensor& x) { return dispatch1("isfinite", {x}); }
Tensor cast(const Tensor& x, DType t) {
  if (x.dtype() == t) return x;
  return dispatch1("cast", {x}, {{"dtype", int64_t(t)}});
}

}  // namespace tr
