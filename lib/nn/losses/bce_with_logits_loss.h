// BCEWithLogitsLoss (torch.nn.BCEWithLogitsLoss): sigmoid + binary cross entropy in one stable
// formula (the functional form is tr::binary_cross_entropy_with_logits).
#pragma once
#include "nn/loss.h"

namespace tr::nn {

class BCEWithLogitsLoss : public Loss {
 public:
  // pos_weight (optional) is registered as the buffer "pos_weight", as in torch.
  explicit BCEWithLogitsLoss(std::string reduction = "mean", Tensor pos_weight = Tensor());
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  Tensor pos_weight;
};

}  // namespace tr::nn
