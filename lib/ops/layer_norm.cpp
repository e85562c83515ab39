// layer_norm (torch.nn.functional.layer_norm; it runs in f32 under autocast): the fused op
// native_layer_norm over rows where the operands allow, else the composition of ops that states
// the same formula.
//   native_layer_norm           (x [R, N], weight [N], bias [N]) -> (y, mean [R], rstd [R])
//   native_layer_norm_backward  (gy, x, weight, mean, rstd) -> (gx, gweight, gbias)
// With xhat = (x - mean) rstd per row and g = gy weight: gx = rstd (g - mean(g) - xhat mean(g xhat)),
// gweight = S_rows(gy xhat), gbias = S_rows(gy). The fused backward runs when no graph of the
// gradient is wanted; with create_graph the same formulas run as differentiable ops.
// attr out_dtype: y in f16 / bf16 beside f32 rows (the norm rounded once, as a cast after it would;
// gy then comes in that dtype). The residual add before a norm fuses in (llm.c's fused residual):
//   _add_native_layer_norm           (x, h, weight, bias) -> (s = x + h, y = norm(s), mean, rstd)
//   _add_native_layer_norm_backward  (gy, s, weight, mean, rstd, gs) -> (gx = gs + dnorm/ds, gweight,
//                                     gbias, gh = gx in h's dtype where that is not x's)
#include "core/grad_mode.h"
#include "ops/autocast.h"
#include "ops/backends.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

namespace {

// mean and rstd are kept in f32 for f16 / bf16 rows (their compute type), else in x's dtype.
DType layer_norm_stat_dtype(DType t) { return t == DType::F16 || t == DType::BF16 ? DType::F32 : t; }

// x: floating rows [R, N]; each of `per_column` (weight, bias) [N] of x's dtype.
void check_rows(const char* op, const Tensor& x, std::initializer_list<const Tensor*> per_column) {
  TR_CHECK(x.dim() == 2 && is_floating(x.dtype()), op, ": expected floating rows [R, N], got ", dtype_name(x.dtype()),
           " of shape ", x.sizes());
  for (const Tensor* t : per_column)
    TR_CHECK(t->dim() == 1 && t->size(0) == x.size(1) && t->dtype() == x.dtype(), op, ": weight and bias must be [",
             x.size(1), "] of ", dtype_name(x.dtype()), ", got ", dtype_name(t->dtype()), " of shape ", t->sizes());
}

// y's dtype: x's, or attr out_dtype (f16 / bf16 beside f32 rows)
DType out_dtype(const char* op, const Tensor& x, const Attrs& a) {
  if (!a.has("out_dtype")) return x.dtype();
  const DType t = DType(a.i("out_dtype"));
  TR_CHECK(t == x.dtype() || (x.dtype() == DType::F32 && is_16bit(t)), op, ": out_dtype ", dtype_name(t), " beside ",
           dtype_name(x.dtype()), " rows (only float16 / bfloat16 beside float32)");
  return t;
}

// (gy, x, weight, mean, rstd): gy of x's shape and of x's dtype or a 16-bit one beside f32 rows
void check_backward(const char* op, const std::vector<Tensor>& in) {
  const Tensor &gy = in[0], &x = in[1];
  check_rows(op, x, {&in[2]});
  TR_CHECK(gy.sizes() == x.sizes() && (gy.dtype() == x.dtype() || (x.dtype() == DType::F32 && is_16bit(gy.dtype()))),
           op, ": grad_output (", dtype_name(gy.dtype()), ", shape ", gy.sizes(), ") does not match the input (",
           dtype_name(x.dtype()), ", shape ", x.sizes(), ")");
  for (int i : {3, 4})
    TR_CHECK(in[size_t(i)].sizes() == Shape{x.size(0)} && in[size_t(i)].dtype() == layer_norm_stat_dtype(x.dtype()), op,
             ": mean and rstd must be [", x.size(0), "] of ", dtype_name(layer_norm_stat_dtype(x.dtype())));
}

// create_graph: the backward's formulas as differentiable ops, the statistics recomputed from x so
// that the result is differentiable in x again
std::tuple<Tensor, Tensor, Tensor> layer_norm_backward_composite(const Tensor& gy_in, const Tensor& x, const Tensor& w,
                                                                 double eps) {
  const Tensor gy = gy_in.to(x.dtype());
  Tensor mu = mean(x, {1}, true), rs = rsqrt(var(x, {1}, 0.0, true) + eps);
  Tensor xhat = (x - mu) * rs, g = gy * w;
  Tensor gx = rs * (g - mean(g, {1}, true) - xhat * mean(g * xhat, {1}, true));
  return {gx, sum(gy * xhat, {0}), sum(gy, {0})};
}

}  // namespace

TR_REGISTER_OP(native_layer_norm) {
  d.num_inputs = 3;
  d.save_outputs = true;
  d.unsaved_outputs = 1u << 0;                 // the backward needs mean and rstd, not y
  d.unmaterialized_grads = 1u << 1 | 1u << 2;  // mean and rstd are the backward's, no gradient
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    check_rows("native_layer_norm", in[0], {&in[1], &in[2]});
    const Shape r{in[0].size(0)};
    const DType st = layer_norm_stat_dtype(in[0].dtype());
    return {{in[0].sizes(), out_dtype("native_layer_norm", in[0], a)}, {r, st}, {r, st}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor &x = c.inputs[0], &w = c.inputs[1], &gy = c.grads[0];
    if (!GradMode::is_enabled()) {
      auto r =
          dispatch("native_layer_norm_backward", {gy, x, w, c.outputs[1].detach(), c.outputs[2].detach()}, c.attrs);
      return {r[0], r[1], r[2]};
    }
    const auto [gx, gw, gb] = layer_norm_backward_composite(gy, x, w, c.attrs.f("eps"));
    return {gx, gw, gb};
  };
}

TR_REGISTER_OP(_add_native_layer_norm) {
  d.num_inputs = 4;
  d.save_outputs = true;
  d.unsaved_outputs = 1u << 1;                     // the backward needs s, mean and rstd, not y
  d.unsaved_inputs = 1u << 0 | 1u << 1 | 1u << 3;  // nor x, h or the bias: s stands for x + h
  d.unmaterialized_grads = 1u << 2 | 1u << 3;
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    const char* op = "_add_native_layer_norm";
    const Tensor &x = in[0], &h = in[1];
    check_rows(op, x, {&in[2], &in[3]});
    const DType yt = out_dtype(op, x, a);
    TR_CHECK(h.sizes() == x.sizes() && (h.dtype() == x.dtype() || h.dtype() == yt), op, ": h (", dtype_name(h.dtype()),
             ", shape ", h.sizes(), ") must have x's shape ", x.sizes(), " and its dtype ", dtype_name(x.dtype()),
             " or the result's ", dtype_name(yt));
    const Shape r{x.size(0)};
    const DType st = layer_norm_stat_dtype(x.dtype());
    return {{x.sizes(), x.dtype()}, {x.sizes(), yt}, {r, st}, {r, st}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor &w = c.inputs[2], &s = c.outputs[0], &gs = c.grads[0], &gy = c.grads[1];
    const DType ht = c.input_specs[1].dtype;
    if (!GradMode::is_enabled()) {
      Attrs a = c.attrs;
      a.set("h_dtype", int64_t(ht));
      auto r = dispatch("_add_native_layer_norm_backward",
                        {gy, s.detach(), w, c.outputs[2].detach(), c.outputs[3].detach(), gs}, a);
      return {r[0], r.size() > 3 ? r[3] : r[0], r[1], r[2]};
    }
    auto [gx, gw, gb] = layer_norm_backward_composite(gy, s, w, c.attrs.f("eps"));
    gx = gs + gx;
    return {gx, gx, gw, gb};
  };
}

TR_REGISTER_OP(native_layer_norm_backward) {
  d.num_inputs = 5;
  d.differentiable = false;  // runs only without create_graph (native_layer_norm's backward)
  d.infer = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<TensorSpec> {
    check_backward("native_layer_norm_backward", in);
    const Tensor& x = in[1];
    const Shape n{x.size(1)};
    return {{x.sizes(), x.dtype()}, {n, x.dtype()}, {n, x.dtype()}};
  };
}

// gh is an output only where h's dtype (attr h_dtype) is not x's
TR_REGISTER_OP(_add_native_layer_norm_backward) {
  d.num_inputs = 6;
  d.differentiable = false;  // runs only without create_graph (_add_native_layer_norm's backward)
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    const char* op = "_add_native_layer_norm_backward";
    check_backward(op, in);
    const Tensor &gy = in[0], &x = in[1], &gs = in[5];
    TR_CHECK(gs.sizes() == x.sizes() && gs.dtype() == x.dtype(), op, ": the sum's gradient (", dtype_name(gs.dtype()),
             ", shape ", gs.sizes(), ") does not match the sum (", dtype_name(x.dtype()), ", shape ", x.sizes(), ")");
    const DType ht = DType(a.i("h_dtype"));
    TR_CHECK(ht == x.dtype() || ht == gy.dtype(), op, ": h of ", dtype_name(ht), " beside ", dtype_name(x.dtype()),
             " rows and a ", dtype_name(gy.dtype()), " result");
    const Shape n{x.size(1)};
    std::vector<TensorSpec> out{{x.sizes(), x.dtype()}, {n, x.dtype()}, {n, x.dtype()}};
    if (ht != x.dtype()) out.push_back({x.sizes(), ht});
    return out;
  };
}

namespace {

// x, weight and bias as the norm takes them (f32 under autocast), checked against normalized_shape;
// n: the number of values normalised together
struct NormArgs {
  Tensor x, weight, bias;
  int64_t n = 1;
  // whether native_layer_norm's kernels take them on x's device
  bool fusable(const char* op) const {
    return weight.defined() && bias.defined() && weight.dtype() == x.dtype() && bias.dtype() == x.dtype() &&
           is_floating(x.dtype()) && n > 0 && has_kernel(op, x.device());
  }
};
NormArgs norm_args(const Tensor& x_arg, const Shape& normalized_shape, const Tensor& weight_arg,
                   const Tensor& bias_arg) {
  // autocast: norms run in f32
  const amp::CastPolicy f32 = amp::CastPolicy::Fp32;
  NormArgs a{amp::autocast_arg(f32, x_arg), amp::autocast_arg(f32, weight_arg), amp::autocast_arg(f32, bias_arg)};
  const Tensor& x = a.x;
  int64_t k = int64_t(normalized_shape.size());
  TR_CHECK(k >= 1 && k <= x.dim(), "layer_norm: normalized_shape ", normalized_shape, " does not fit input shape ",
           x.sizes());
  for (int64_t i = 0; i < k; ++i)
    TR_CHECK(x.size(x.dim() - k + i) == normalized_shape[i], "layer_norm: input shape ", x.sizes(),
             " does not end with normalized_shape ", normalized_shape);
  if (a.weight.defined())
    TR_CHECK(a.weight.sizes() == normalized_shape, "layer_norm: weight shape ", a.weight.sizes(),
             " != ", normalized_shape);
  if (a.bias.defined())
    TR_CHECK(a.bias.sizes() == normalized_shape, "layer_norm: bias shape ", a.bias.sizes(), " != ", normalized_shape);
  for (int64_t s : normalized_shape) a.n *= s;
  return a;
}

// whether the kernels write y of dtype out beside rows of dtype rows: out is rows', or f16 / bf16 beside f32
bool kernel_writes(DType rows, DType out) { return out == rows || (rows == DType::F32 && is_16bit(out)); }

// the norm of prepared arguments with y of dtype `out`: native_layer_norm where its kernels take
// them (writing `out` itself where they can and fusion is on), else the composite; a cast after
// either where y is not yet `out`
Tensor layer_norm_of(const NormArgs& a, size_t k, double eps, DType out) {
  const Tensor& x = a.x;
  if (a.fusable("native_layer_norm")) {
    Attrs attrs{{"eps", eps}};
    if (out != x.dtype() && backends::fusion().enabled && kernel_writes(x.dtype(), out))
      attrs.set("out_dtype", int64_t(out));
    Tensor rows = x.reshape({-1, a.n}).contiguous();
    Tensor y = dispatch("native_layer_norm", {rows, a.weight.reshape({a.n}), a.bias.reshape({a.n})}, attrs)[0];
    return y.reshape(x.sizes()).to(out);
  }
  Shape dims;
  for (int64_t i = x.dim() - int64_t(k); i < x.dim(); ++i) dims.push_back(i);
  Tensor mu = mean(x, dims, true);
  Tensor v = var(x, dims, 0.0, true);
  Tensor y = (x - mu) * rsqrt(v + eps);
  if (a.weight.defined()) y = y * a.weight;
  if (a.bias.defined()) y = y + a.bias;
  return y.to(out);
}

}  // namespace

// (x - E[x]) / sqrt(Var[x] + eps) * weight + bias over the trailing normalized_shape dims
// (biased variance, as torch.nn.functional.layer_norm).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  const NormArgs a = norm_args(x, normalized_shape, weight, bias);
  return layer_norm_of(a, normalized_shape.size(), eps, a.x.dtype());
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps,
                  DType out_dtype) {
  return layer_norm_of(norm_args(x, normalized_shape, weight, bias), normalized_shape.size(), eps, out_dtype);
}

std::pair<Tensor, Tensor> add_layer_norm(const Tensor& x, const Tensor& h, const Shape& normalized_shape,
                                         const Tensor& weight_arg, const Tensor& bias_arg, double eps,
                                         DType out_dtype) {
  const NormArgs a = norm_args(x, normalized_shape, weight_arg, bias_arg);
  const bool fused = backends::fusion().enabled && a.x.is_same(x) && h.sizes() == x.sizes() &&
                     result_type({x, h}) == x.dtype() && (h.dtype() == x.dtype() || h.dtype() == out_dtype) &&
                     kernel_writes(x.dtype(), out_dtype) && a.fusable("_add_native_layer_norm") &&
                     h.device() == x.device();
  if (!fused) {
    Tensor s = x + h;
    return {s, layer_norm(s, normalized_shape, weight_arg, bias_arg, eps, out_dtype)};
  }
  const Shape rows{-1, a.n};
  auto r = dispatch(
      "_add_native_layer_norm",
      {x.reshape(rows).contiguous(), h.reshape(rows).contiguous(), a.weight.reshape({a.n}), a.bias.reshape({a.n})},
      {{"eps", eps}, {"out_dtype", int64_t(out_dtype)}});
  return {r[0].reshape(x.sizes()), r[1].reshape(x.sizes())};
}

}  // namespace tr
