// torch.nn.Tanh: y = tanh(x). No parameters, any input shape, output of the same shape.
#pragma once
#include "nn/module.h"

namespace tr::nn {

class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override;
};

}  // namespace tr::nn
