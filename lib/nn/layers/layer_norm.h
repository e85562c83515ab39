// LayerNorm: normalisation over the trailing normalized_shape dims of each sample (torch.nn.LayerNorm).
#pragma once
#include "nn/module.h"

namespace tr::nn {

class LayerNorm : public Module {
 public:
  // weight = 1, bias = 0, both of shape normalized_shape (when elementwise_affine).
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  // y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias, E and (biased) Var over the trailing dims.
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Shape normalized_shape;
  double eps;
  bool elementwise_affine;
  Tensor weight, bias;
};

}  // namespace tr::nn
