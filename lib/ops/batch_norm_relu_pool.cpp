// A CNN block's batch norm (batch statistics), relu and max pool as one op, and its gradient as one:
//   batch_norm_relu_max_pool2d           (x, weight, bias) -> (y, idx, mean, var):
//                                        y, idx = max_pool2d(relu(batch_norm(x))), mean and var as batch_norm's
//   batch_norm_relu_max_pool2d_backward  (gy, x, weight, mean, var, y, idx) -> (gx, gweight, gbias)
// Attrs: eps, and max_pool2d's kernel, stride, padding, dilation. The chain batch_norm -> relu ->
// max_pool2d is the spec ([run] fused_ops = false). Neither the normalised nor the relu'd
// activations are kept: the backward needs only x, the statistics, and the pool's y and idx, since
// the relu's mask at a window's argmax is y > 0 there. So the gradient is the chain's backward with
// the relu's mask taken before the pool's scatter instead of after it, the same numbers.
#include "core/grad_mode.h"
#include "ops/autocast.h"
#include "ops/backends.h"
#include "ops/ops.h"
#include "ops/pool_geom.h"
#include "ops/registry.h"

namespace tr {

namespace {

constexpr const char* kOp = "batch_norm_relu_max_pool2d";
constexpr const char* kBackward = "batch_norm_relu_max_pool2d_backward";

// x [N, C, H, W] floating; the [C] tensors named in `ts` of x's dtype
void check_operands(const char* op, const Tensor& x, std::initializer_list<std::pair<const char*, const Tensor*>> ts) {
  TR_CHECK(x.dim() == 4 && is_floating(x.dtype()), op, ": expected a floating point input [N, C, H, W], got ",
           dtype_name(x.dtype()), " of shape ", x.sizes());
  for (auto& [name, t] : ts)
    TR_CHECK(t->dim() == 1 && t->size(0) == x.size(1) && t->dtype() == x.dtype(), op, ": ", name, " (",
             dtype_name(t->dtype()), ", shape ", t->sizes(), ") must be [", x.size(1), "] of the input's dtype ",
             dtype_name(x.dtype()));
}

Attrs pool_attrs(const Attrs& a) {
  return {{"kernel", a.ints("kernel")},
          {"stride", a.ints("stride")},
          {"padding", a.ints("padding")},
          {"dilation", a.ints("dilation")}};
}

}  // namespace

// The chain's gradients, as composite ops when a graph of the gradient is wanted:
//   gz = max_pool2d_backward(threshold_backward(gy, y), idx),  (gx, gw, gb) = batch_norm_backward(gz, ...)
TR_REGISTER_OP(batch_norm_relu_max_pool2d) {
  d.autocast = amp::CastPolicy::Fp32;
  d.num_inputs = 3;
  d.save_outputs = true;
  d.unsaved_inputs = 1u << 2;                      // the bias
  d.unmaterialized_grads = (1u << 2) | (1u << 3);  // the statistics get no gradient
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    const Tensor& x = in[0];
    check_operands(kOp, x, {{"weight", &in[1]}, {"bias", &in[2]}});
    TR_CHECK(x.size(0) * x.size(2) * x.size(3) > 1, kOp, ": expected more than 1 value per channel, got input size ",
             x.sizes());
    const Shape y = pool_out_shape(kOp, x.sizes(), a);
    const Shape c{x.size(1)};
    return {{y, x.dtype()}, {y, DType::I64}, {c, x.dtype()}, {c, x.dtype()}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor &gy = c.grads[0], &x = c.inputs[0], &w = c.inputs[1], &y = c.outputs[0], &idx = c.outputs[1];
    const Tensor mean = c.outputs[2].detach(), var = c.outputs[3].detach();
    const Attrs eps{{"eps", c.attrs.f("eps")}};
    std::vector<Tensor> r;
    if (!GradMode::is_enabled() && has_kernel(kBackward, gy.device())) {
      r = dispatch(kBackward, {gy, x, w, mean, var, y, idx}, c.attrs);
    } else {
      Attrs pa = pool_attrs(c.attrs);
      pa.set("input_size", x.sizes());
      Tensor gz = dispatch1("max_pool2d_backward", {threshold_backward(gy, y, 0.0), idx}, pa);
      r = dispatch("batch_norm_backward", {gz, x, w, mean, var}, eps);
    }
    return {r[0], r[1], r[2]};
  };
}

TR_REGISTER_OP(batch_norm_relu_max_pool2d_backward) {
  d.num_inputs = 7;
  d.differentiable = false;  // runs only without create_graph (batch_norm_relu_max_pool2d's backward)
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    const Tensor &gy = in[0], &x = in[1], &y = in[5], &idx = in[6];
    check_operands(kBackward, x, {{"weight", &in[2]}, {"mean", &in[3]}, {"var", &in[4]}});
    const Shape ys = pool_out_shape(kBackward, x.sizes(), a);
    TR_CHECK(gy.sizes() == ys && gy.dtype() == x.dtype() && y.sizes() == ys && y.dtype() == x.dtype(), kBackward,
             ": grad_output (", dtype_name(gy.dtype()), ", shape ", gy.sizes(), ") and output (", dtype_name(y.dtype()),
             ", shape ", y.sizes(), ") must be ", dtype_name(x.dtype()), " of the pooled shape ", ys);
    TR_CHECK(idx.dtype() == DType::I64 && idx.sizes() == ys, kBackward, ": indices (", dtype_name(idx.dtype()),
             ", shape ", idx.sizes(), ") must be int64 of the pooled shape ", ys);
    const Shape c{x.size(1)};
    return {{x.sizes(), x.dtype()}, {c, x.dtype()}, {c, x.dtype()}};
  };
}

BatchNormOut batch_norm_relu_max_pool2d(const Tensor& x_arg, const Tensor& weight, const Tensor& bias, double eps,
                                        Pair kernel, Pair stride, Pair padding, Pair dilation) {
  // autocast: norms run in f32 (here, so that the fused kernel sees one dtype)
  const Tensor x = amp::autocast_arg(amp::CastPolicy::Fp32, x_arg);
  TR_CHECK(x.dim() == 4, kOp, ": expected a 4-D input [N, C, H, W], got shape ", x.sizes());
  TR_CHECK(eps > 0, kOp, ": eps must be positive, got ", eps);
  const Pair k = expand_pair(kernel, "max_pool2d", "kernel_size", 1);
  const Pair s = stride.empty() ? k : expand_pair(stride, "max_pool2d", "stride", 1);
  const Pair p = expand_pair(padding, "max_pool2d", "padding", 0),
             dil = expand_pair(dilation, "max_pool2d", "dilation", 1);
  const bool one_dtype =
      (!weight.defined() || weight.dtype() == x.dtype()) && (!bias.defined() || bias.dtype() == x.dtype());
  if (!backends::fusion().enabled || !has_kernel(kOp, x.device()) || !one_dtype) {
    BatchNormOut r = batch_norm(x, Tensor(), Tensor(), weight, bias, true, eps);
    r.output = max_pool2d(relu(r.output), k, s, p, dil);
    return r;
  }
  const TensorOptions opts = TensorOptions(x.dtype()).device(x.device());
  const Tensor w = weight.defined() ? weight : ones({x.size(1)}, opts);
  const Tensor b = bias.defined() ? bias : zeros({x.size(1)}, opts);
  auto r = dispatch(kOp, {x, w, b}, {{"eps", eps}, {"kernel", k}, {"stride", s}, {"padding", p}, {"dilation", dil}});
  return {r[0], r[2].detach(), r[3].detach()};
}

}  // namespace tr
