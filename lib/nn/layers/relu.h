// torch.nn.ReLU: y = max(0, x), any shape. No parameters, any input shape, output of the same shape.
#pragma once
#include "nn/module.h"

namespace tr::nn {

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override;
};

}  // namespace tr::nn
