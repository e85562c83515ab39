// Dropout: zeroes each element with probability p in training and scales the rest by 1/(1-p)
// (inverted dropout, torch.nn.Dropout); the identity in eval.
#pragma once
#include "core/rng.h"
#include "nn/module.h"

namespace tr::nn {

class Dropout : public Module {
 public:
  // p in [0, 1]; gen: the generator of the masks (default_generator() when null).
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);
  // train: x * mask, mask_i = (U_i >= p) / (1 - p) (zeros when p = 1); eval: x.
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  double p;
  Generator* gen;
};

}  // namespace tr::nn
