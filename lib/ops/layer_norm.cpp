// layer_norm as a composition of ops (torch.nn.functional.layer_norm); it runs in f32 under autocast.
#include "ops/autocast.h"
#include "ops/ops.h"

namespace tr {

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

}  // namespace tr
