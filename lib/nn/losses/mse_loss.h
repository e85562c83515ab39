// MSELoss (torch.nn.MSELoss): (input - target)^2 (the functional form is tr::mse_loss).
#pragma once
#include "nn/loss.h"

namespace tr::nn {

class MSELoss : public Loss {
 public:
  explicit MSELoss(std::string reduction = "mean");
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
};

}  // namespace tr::nn
