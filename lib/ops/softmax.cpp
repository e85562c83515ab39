// softmax / log_softmax along a dim, with backward written in differentiable ops; layer_norm and
// the two losses the core needs are compositions.
#include <cmath>
#include "ops/infer.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

TR_REGISTER_OP(softmax) {
  d.autocast = amp::CastPolicy::Fp32;
  d.num_inputs = 1;
  d.promote = Promote::CommonFloat;
  d.infer = infer_same;
  d.save_inputs = false;
  d.save_outputs = true;
  // dx = y * (g - sum(g * y, dim))
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor& y = c.outputs[0];
    const Tensor& g = c.grads[0];
    int64_t dim = c.attrs.i("dim");
    return {y * (g - sum(g * y, {dim}, true))};
  };
}
TR_REGISTER_OP(log_softmax) {
  d.autocast = amp::CastPolicy::Fp32;
  d.num_inputs = 1;
  d.promote = Promote::CommonFloat;
  d.infer = infer_same;
  d.save_inputs = false;
  d.save_outputs = true;
  // dx = g - exp(y) * sum(g, dim)
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor& y = c.outputs[0];
    const Tensor& g = c.grads[0];
    int64_t dim = c.attrs.i("dim");
    return {g - exp(y) * sum(g, {dim}, true)};
  };
}

Tensor softmax(const Tensor& x, int64_t dim) {
  return dispatch1("softmax", {x}, {{"dim", wrap_dim(dim, x.dim(), "softmax")}});
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return dispatch1("log_softmax", {x}, {{"dim", wrap_dim(dim, x.dim(), "log_softmax")}});
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
  Shape dims;
  for (int64_t i = x.dim() - k; i < x.dim(); ++i) dims.push_back(i);
  Tensor mu = mean(x, dims, true);
  Tensor v = var(x, dims, 0.0, true);
  Tensor y = (x - mu) * rsqrt(v + eps);
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

// mean over the batch of -log_softmax(logits)[target]; logits [N, C], target [N] (int64)
Tensor cross_entropy(const Tensor& logits_arg, const Tensor& target) {
  const Tensor logits = amp::autocast_arg(amp::CastPolicy::Fp32, logits_arg);
  TR_CHECK(logits.dim() == 2, "cross_entropy: expected logits of shape [N, C], got ", logits.sizes());
  TR_CHECK(target.dim() == 1 && target.size(0) == logits.size(0), "cross_entropy: target shape ", target.sizes(),
           " does not match logits shape ", logits.sizes());
  Tensor lp = log_softmax(logits, 1);
  return -mean(gather(lp, 1, target.unsqueeze(1)));
}

Tensor mse_loss(const Tensor& a, const Tensor& b) {
  Tensor d = amp::autocast_arg(amp::CastPolicy::Fp32, a) - amp::autocast_arg(amp::CastPolicy::Fp32, b);
  return mean(d * d);
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.sizes() != b.sizes()) return false;
  auto x = a.tolist(), y = b.tolist();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (!(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]))) return false;
  }
  return true;
}

bool equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  return a.tolist() == b.tolist();
}

}  // namespace tr
