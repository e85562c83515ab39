// layer_norm (torch.nn.functional.layer_norm; it runs in f32 under autocast): the fused op
// native_layer_norm over rows where the operands allow, else the composition of ops that states
// the same formula.
//   native_layer_norm           (x [R, N], weight [N], bias [N]) -> (y, mean [R], rstd [R])
//   native_layer_norm_backward  (gy, x, weight, mean, rstd) -> (gx, gweight, gbias)
// With xhat = (x - mean) rstd per row and g = gy weight: gx = rstd (g - mean(g) - xhat mean(g xhat)),
// gweight = S_rows(gy xhat), gbias = S_rows(gy). The fused backward runs when no graph of the
// gradient is wanted; with create_graph the same formulas run as differentiable ops.
#include "core/grad_mode.h"
#include "ops/autocast.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

namespace {

// mean and rstd are kept in f32 for f16 / bf16 rows (their compute type), else in x's dtype.
DType stat_dtype(DType t) { return t == DType::F16 || t == DType::BF16 ? DType::F32 : t; }

// x: floating rows [R, N]; each of `per_column` (weight, bias) [N] of x's dtype.
void check_rows(const char* op, const Tensor& x, std::initializer_list<const Tensor*> per_column) {
  TR_CHECK(x.dim() == 2 && is_floating(x.dtype()), op, ": expected floating rows [R, N], got ", dtype_name(x.dtype()),
           " of shape ", x.sizes());
  for (const Tensor* t : per_column)
    TR_CHECK(t->dim() == 1 && t->size(0) == x.size(1) && t->dtype() == x.dtype(), op, ": weight and bias must be [",
             x.size(1), "] of ", dtype_name(x.dtype()), ", got ", dtype_name(t->dtype()), " of shape ", t->sizes());
}

}  // namespace

TR_REGISTER_OP(native_layer_norm) {
  d.num_inputs = 3;
  d.save_outputs = true;
  d.unsaved_outputs = 1u << 0;  // the backward needs mean and rstd, not y
  d.infer = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<TensorSpec> {
    check_rows("native_layer_norm", in[0], {&in[1], &in[2]});
    const Shape r{in[0].size(0)};
    const DType st = stat_dtype(in[0].dtype());
    return {{in[0].sizes(), in[0].dtype()}, {r, st}, {r, st}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor &x = c.inputs[0], &w = c.inputs[1], &gy = c.grads[0];
    if (!GradMode::is_enabled()) {
      auto r = dispatch("native_layer_norm_backward", {gy, x, w, c.outputs[1].detach(), c.outputs[2].detach()}, c.attrs);
      return {r[0], r[1], r[2]};
    }
    // create_graph: the statistics recomputed from x, so the result is differentiable in x again
    Tensor mu = mean(x, {1}, true), rs = rsqrt(var(x, {1}, 0.0, true) + c.attrs.f("eps"));
    Tensor xhat = (x - mu) * rs, g = gy * w;
    Tensor gx = rs * (g - mean(g, {1}, true) - xhat * mean(g * xhat, {1}, true));
    return {gx, sum(gy * xhat, {0}), sum(gy, {0})};
  };
}

TR_REGISTER_OP(native_layer_norm_backward) {
  d.num_inputs = 5;
  d.differentiable = false;  // runs only without create_graph (native_layer_norm's backward)
  d.infer = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<TensorSpec> {
    const char* op = "native_layer_norm_backward";
    const Tensor &gy = in[0], &x = in[1];
    check_rows(op, x, {&in[2]});
    TR_CHECK(gy.sizes() == x.sizes() && gy.dtype() == x.dtype(), op, ": grad_output (", dtype_name(gy.dtype()),
             ", shape ", gy.sizes(), ") does not match the input (", dtype_name(x.dtype()), ", shape ", x.sizes(), ")");
    for (int i : {3, 4})
      TR_CHECK(in[size_t(i)].sizes() == Shape{x.size(0)} && in[size_t(i)].dtype() == stat_dtype(x.dtype()), op,
               ": mean and rstd must be [", x.size(0), "] of ", dtype_name(stat_dtype(x.dtype())));
    const Shape n{x.size(1)};
    return {{x.sizes(), x.dtype()}, {n, x.dtype()}, {n, x.dtype()}};
  };
}

// (x - E[x]) / sqrt(Var[x] + eps) * weight + bias over the trailing normalized_shape dims
// (biased variance, as torch.nn.functional.layer_norm).
Tensor layer_norm(const Tensor& x_arg, const Shape& normalized_shape, const Tensor& weight_arg, const Tensor& bias_arg,
                  double eps) {
  // autocast: norms run in f32
  const amp::CastPolicy f32 = amp::CastPolicy::Fp32;
  const Tensor x = amp::autocast_arg(f32, x_arg), weight = amp::autocast_arg(f32, weight_arg),
               bias = amp::autocast_arg(f32, bias_arg);
  int64_t k = int64_t(normalized_shape.size());
  TR_CHECK(k >= 1 && k <= x.dim(), "layer_norm: normalized_shape ", normalized_shape, " does not fit input shape ",
           x.sizes());
  for (int64_t i = 0; i < k; ++i)
    TR_CHECK(x.size(x.dim() - k + i) == normalized_shape[i], "layer_norm: input shape ", x.sizes(),
             " does not end with normalized_shape ", normalized_shape);
  if (weight.defined()) TR_CHECK(weight.sizes() == normalized_shape, "layer_norm: weight shape ", weight.sizes(), " != ", normalized_shape);
  if (bias.defined()) TR_CHECK(bias.sizes() == normalized_shape, "layer_norm: bias shape ", bias.sizes(), " != ", normalized_shape);
  int64_t n = 1;
  for (int64_t s : normalized_shape) n *= s;
  const bool fused = weight.defined() && bias.defined() && weight.dtype() == x.dtype() && bias.dtype() == x.dtype() &&
                     is_floating(x.dtype()) && n > 0 && has_kernel("native_layer_norm", x.device());
  if (fused) {
    Tensor rows = x.reshape({-1, n}).contiguous();
    Tensor y = dispatch("native_layer_norm", {rows, weight.reshape({n}), bias.reshape({n})}, {{"eps", eps}})[0];
    return y.reshape(x.sizes());
  }
  Shape dims;
  for (int64_t i = x.dim() - k; i < x.dim(); ++i) dims.push_back(i);
  Tensor mu = mean(x, dims, true);
  Tensor v = var(x, dims, 0.0, true);
  Tensor y = (x - mu) * rsqrt(v + eps);
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

}  // namespace tr
