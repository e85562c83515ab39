// torch.nn.ReLU6: y = min(max(0, x), 6); dy/dx = 1 on (0, 6) only (torch's hardtanh backward). No parameters, any input
// shape, output of the same shape.
#pragma once
#include "nn/module.h"

namespace tr::nn {

class ReLU6 : public Module {
 public:
  ReLU6() : Module("ReLU6") {}
  Tensor forward(const Tensor& x) override;
};

}  // namespace tr::nn
