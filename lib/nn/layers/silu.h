// torch.nn.SiLU: y = x sigmoid(x). No parameters, any input shape, output of the same shape.
#pragma once
#include "nn/module.h"

namespace tr::nn {

class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& x) override;
};

}  // namespace tr::nn
