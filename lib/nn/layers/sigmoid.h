// torch.nn.Sigmoid: y = 1 / (1 + exp(-x)). No parameters, any input shape, output of the same shape.
#pragma once
#include "nn/module.h"

namespace tr::nn {

class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x) override;
};

}  // namespace tr::nn
