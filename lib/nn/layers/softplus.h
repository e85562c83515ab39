// torch.nn.Softplus: y = log(1 + exp(beta x)) / beta, and x where beta x > threshold. No parameters, any input shape,
// output of the same shape.
#pragma once
#include <string>
#include "nn/module.h"

namespace tr::nn {

class Softplus : public Module {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double beta, threshold;
};

}  // namespace tr::nn
