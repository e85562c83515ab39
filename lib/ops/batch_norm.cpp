// Batch normalisation over dim 1 of x [N, C, *] (NC, NCL, NCHW) as three fused ops:
//   batch_norm           (x, weight, bias) -> (y, mean, var): batch statistics (training)
//   batch_norm_backward  (gy, x, weight, mean, var) -> (gx, gweight, gbias): its gradient
//   batch_norm_elemt     (x, weight, bias, mean, var) -> y: normalisation by given statistics (eval)
// var is the biased variance; every op takes eps as an attribute and uses invstd = 1/sqrt(var + eps).
// batch_norm_backward's own backward is torch's batchnorm_double_backward written with
// differentiable ops (it recomputes mean and var from x), so gradients of any order exist.
// Devices without these kernels (CUDA today) take the composite of mean/var/sub/rsqrt/mul/add.
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

namespace {

// Every dim but the channel dim 1.
Shape stat_dims(int64_t ndim) {
  Shape d{0};
  for (int64_t i = 2; i < ndim; ++i) d.push_back(i);
  return d;
}
// A [C] tensor shaped to broadcast against x [N, C, *] (as [1, C, 1, ...]).
Tensor per_channel(const Tensor& v, int64_t ndim) {
  Shape s(size_t(ndim), 1);
  s[1] = v.numel();
  return reshape(v, s);
}
// Elements per channel: N * prod(sizes[2:]).
int64_t per_channel_count(const Shape& x) {
  int64_t m = x[0];
  for (size_t i = 2; i < x.size(); ++i) m *= x[i];
  return m;
}

void check_x(const char* op, const Tensor& x) {
  TR_CHECK(x.dim() >= 2, op, ": expected an input [N, C, *] with at least 2 dims, got shape ", x.sizes());
  TR_CHECK(is_floating(x.dtype()), op, ": expected a floating point input, got ", dtype_name(x.dtype()));
}
// Each of `ts` (named by `names`) is a [C] tensor of x's dtype.
void check_channels(const char* op, const Tensor& x, std::initializer_list<std::pair<const char*, const Tensor*>> ts) {
  for (auto& [name, t] : ts) {
    TR_CHECK(t->dim() == 1 && t->size(0) == x.size(1), op, ": ", name, " of shape ", t->sizes(), " does not match the ",
             x.size(1), " channels of input shape ", x.sizes());
    TR_CHECK(t->dtype() == x.dtype(), op, ": ", name, " (", dtype_name(t->dtype()), ") and input (",
             dtype_name(x.dtype()), ") must have the same dtype");
  }
}

Attrs eps_attr(double eps) { return {{"eps", eps}}; }

}  // namespace

// y = (x - mean) invstd weight + bias with mean and biased var over every dim but 1. The
// statistics are outputs for the caller's running averages; gradients reaching them are dropped
// (torch's save_mean / save_invstd are not differentiable either).
// dx, dweight, dbias = batch_norm_backward(g, x, weight, mean, var).
TR_REGISTER_OP(batch_norm) {
  d.autocast = amp::CastPolicy::Fp32;
  d.num_inputs = 3;
  d.save_outputs = true;
  d.unsaved_outputs = 1u << 0;  // the backward needs mean and var, not y
  d.infer = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<TensorSpec> {
    const Tensor& x = in[0];
    check_x("batch_norm", x);
    check_channels("batch_norm", x, {{"weight", &in[1]}, {"bias", &in[2]}});
    TR_CHECK(per_channel_count(x.sizes()) > 0, "batch_norm: expected values in every channel, got input shape ",
             x.sizes());
    Shape c{x.size(1)};
    return {{x.sizes(), x.dtype()}, {c, x.dtype()}, {c, x.dtype()}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    auto r = dispatch("batch_norm_backward",
                      {c.grads[0], c.inputs[0], c.inputs[1], c.outputs[1].detach(), c.outputs[2].detach()}, c.attrs);
    return {r[0], r[1], r[2]};
  };
}

// With xmu = x - mean, invstd = 1/sqrt(var + eps), M values per channel and sums S over every dim but 1:
//   gbias = S(gy),  gweight = S(gy xmu) invstd,
//   gx = (gy - S(gy)/M - xmu invstd^2 S(gy xmu)/M) invstd weight.
// mean and var must be the batch statistics of x; they get no gradient (their dependence on x is
// part of the formula for gx).
TR_REGISTER_OP(batch_norm_backward) {
  d.num_inputs = 5;
  d.infer = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<TensorSpec> {
    const char* op = "batch_norm_backward";
    const Tensor &gy = in[0], &x = in[1];
    check_x(op, x);
    TR_CHECK(gy.sizes() == x.sizes() && gy.dtype() == x.dtype(), op, ": grad_output (", dtype_name(gy.dtype()),
             ", shape ", gy.sizes(), ") does not match the input (", dtype_name(x.dtype()), ", shape ", x.sizes(), ")");
    check_channels(op, x, {{"weight", &in[2]}, {"mean", &in[3]}, {"var", &in[4]}});
    Shape c{x.size(1)};
    return {{x.sizes(), x.dtype()}, {c, x.dtype()}, {c, x.dtype()}};
  };
  // torch's batchnorm_double_backward (training): ggI, ggW, ggB are the gradients arriving at
  // gx, gweight, gbias; returns the gradients of gy, x and weight. mean and invstd are recomputed
  // from x with differentiable ops, so this is again differentiable in x.
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor &gO = c.inputs[0], &x = c.inputs[1], &w = c.inputs[2];
    const Tensor &ggI = c.grads[0], &ggW = c.grads[1], &ggB = c.grads[2];
    const int64_t nd = x.dim();
    const Shape dims = stat_dims(nd);
    const double M = double(per_channel_count(x.sizes()));
    auto S = [&](const Tensor& t) { return sum(t, dims, true); };  // [1, C, 1, ...]
    Tensor xmu = x - mean(x, dims, true);
    Tensor s1 = rsqrt(var(x, dims, 0.0, true) + c.attrs.f("eps"));  // invstd
    Tensor s2 = s1 * s1, s3 = s2 * s1;
    Tensor wb = per_channel(w, nd), ggWb = per_channel(ggW, nd), ggBb = per_channel(ggB, nd);
    Tensor gO_sum = S(gO), gOxmu_sum = S(gO * xmu);
    // the first backward's gx for output gradient g and scale gamma
    auto first_backward = [&](const Tensor& g, const Tensor& gamma) {
      return (gamma * s1 / M) * (M * g - S(g) - xmu * s2 * S(g * xmu));
    };
    Tensor ggO, gI, gW;
    if (c.needs_input_grad[0]) ggO = first_backward(ggI, wb) + ggWb * xmu * s1 + ggBb;
    if (c.needs_input_grad[1]) {
      Tensor ggI_sum = S(ggI), ggIxmu_sum = S(ggI * xmu);
      Tensor all_sub = ggI_sum * gO_sum / M - S(gO * ggI) + s2 * gOxmu_sum * ggIxmu_sum * (3.0 / M);
      Tensor t0 = xmu * s3 * all_sub / M;
      Tensor t1 = (ggIxmu_sum * s3 / M) * (gO_sum / M - gO);
      Tensor t2 = (gOxmu_sum * s3 / M) * (ggI_sum / M - ggI);
      Tensor g_term = gO * s1 - s1 * gO_sum / M - xmu * s3 * gOxmu_sum / M;  // d gweight / dx, per unit ggW
      gI = wb * (t0 + t1 + t2) + ggWb * g_term;
    }
    if (c.needs_input_grad[2]) gW = sum(ggI * first_backward(gO, ones({}, TensorOptions(x.dtype()))), dims);
    return {ggO, gI, gW, Tensor(), Tensor()};
  };
}

// y = (x - mean) invstd weight + bias with given per-channel statistics (invstd = 1/sqrt(var + eps)).
// Its backward is a composite of differentiable ops.
TR_REGISTER_OP(batch_norm_elemt) {
  d.autocast = amp::CastPolicy::Fp32;
  d.num_inputs = 5;
  d.infer = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<TensorSpec> {
    const Tensor& x = in[0];
    check_x("batch_norm_elemt", x);
    check_channels("batch_norm_elemt", x, {{"weight", &in[1]}, {"bias", &in[2]}, {"mean", &in[3]}, {"var", &in[4]}});
    return {{x.sizes(), x.dtype()}};
  };
  // gx = g invstd w;  gw = S(g xmu) invstd;  gb = S(g);  gmean = -S(g) invstd w;
  // gvar = S(g xmu) w d(invstd)/dvar = -S(g xmu) w invstd^3 / 2
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor &x = c.inputs[0], &w = c.inputs[1], &m = c.inputs[3], &v = c.inputs[4], &g = c.grads[0];
    const int64_t nd = x.dim();
    const Shape dims = stat_dims(nd);
    Tensor invstd = rsqrt(v + c.attrs.f("eps"));
    const auto& need = c.needs_input_grad;
    Tensor gx, gw, gb, gm, gv, gxmu_sum, g_sum;
    if (need[1] || need[4]) gxmu_sum = sum(g * (x - per_channel(m, nd)), dims);
    if (need[2] || need[3]) g_sum = sum(g, dims);
    if (need[0]) gx = g * per_channel(invstd * w, nd);
    if (need[1]) gw = gxmu_sum * invstd;
    if (need[2]) gb = g_sum;
    if (need[3]) gm = -(g_sum * invstd * w);
    if (need[4]) gv = gxmu_sum * w * invstd * invstd * invstd * -0.5;
    return {gx, gw, gb, gm, gv};
  };
}

namespace {
// The fused ops run where the device has their kernels and every operand has x's dtype (mixed
// dtypes keep the composite's type promotion).
bool use_fused(const Tensor& x, std::initializer_list<const Tensor*> others) {
  for (const char* op : {"batch_norm", "batch_norm_backward", "batch_norm_elemt"})
    if (!has_kernel(op, x.device())) return false;
  for (const Tensor* t : others)
    if (t->defined() && t->dtype() != x.dtype()) return false;
  return true;
}
}  // namespace

BatchNormOut batch_norm(const Tensor& x_arg, const Tensor& running_mean, const Tensor& running_var,
                        const Tensor& weight, const Tensor& bias, bool training, double eps) {
  const char* op = "batch_norm";
  // autocast: norms run in f32 (here, so that the fused kernels see one dtype)
  const Tensor x = amp::autocast_arg(amp::CastPolicy::Fp32, x_arg);
  check_x(op, x);
  TR_CHECK(eps > 0, op, ": eps must be positive, got ", eps);
  const int64_t C = x.size(1), nd = x.dim();
  TensorOptions opts = TensorOptions(x.dtype()).device(x.device());
  Tensor w = weight.defined() ? weight : ones({C}, opts);
  Tensor b = bias.defined() ? bias : zeros({C}, opts);
  if (!training) {
    TR_CHECK(running_mean.defined() && running_var.defined(), op,
             ": running_mean and running_var are required when training is false");
    if (use_fused(x, {&weight, &bias, &running_mean, &running_var}))
      return {dispatch1("batch_norm_elemt", {x, w, b, running_mean, running_var}, eps_attr(eps)), {}, {}};
    Tensor y = (x - per_channel(running_mean, nd)) * rsqrt(per_channel(running_var, nd) + eps);
    if (weight.defined()) y = y * per_channel(weight, nd);
    if (bias.defined()) y = y + per_channel(bias, nd);
    return {y, {}, {}};
  }
  TR_CHECK(per_channel_count(x.sizes()) > 1, op,
           ": expected more than 1 value per channel when training, got input size ", x.sizes());
  if (use_fused(x, {&weight, &bias})) {
    auto r = dispatch(op, {x, w, b}, eps_attr(eps));
    return {r[0], r[1].detach(), r[2].detach()};
  }
  Shape dims = stat_dims(nd);
  Tensor mu = mean(x, dims, true), v = var(x, dims, 0.0, true);
  Tensor y = (x - mu) * rsqrt(v + eps);
  if (weight.defined()) y = y * per_channel(weight, nd);
  if (bias.defined()) y = y + per_channel(bias, nd);
  return {y, mu.detach().reshape({C}), v.detach().reshape({C})};
}

}  // namespace tr
