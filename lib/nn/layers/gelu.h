// torch.nn.GELU: y = x Phi(x) ("none"), or 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) ("tanh"). No parameters, any
// input shape, output of the same shape.
#pragma once
#include <string>
#include "nn/module.h"

namespace tr::nn {

class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::string approximate;
};

}  // namespace tr::nn
