// CrossEntropyLoss (torch.nn.CrossEntropyLoss): log_softmax + negative log-likelihood over dim 1,
// with ignore_index and label smoothing (the functional form is tr::cross_entropy).
#pragma once
#include "nn/loss.h"

namespace tr::nn {

class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(int64_t ignore_index = -100, double label_smoothing = 0.0, std::string reduction = "mean");
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string extra_repr() const override;
  int64_t ignore_index;
  double label_smoothing;
};

}  // namespace tr::nn
