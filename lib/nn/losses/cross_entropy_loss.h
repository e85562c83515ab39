// CrossEntropyLoss (torch.nn.CrossEntropyLoss): log_softmax + negative log-likelihood over dim 1,
// with ignore_index and label smoothing (the functional form is tr::cross_entropy).
#pragma once
#include "nn/loss.h"
#include "ops/ops.h"

namespace tr::nn {

class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(int64_t ignore_index = -100, double label_smoothing = 0.0, std::string reduction = "mean");
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  // The loss and, where the fused op ran, whether each target is its row's argmax
  // (tr::cross_entropy_scored); the forward without the module's hooks.
  CrossEntropyOut forward_scored(const Tensor& input, const Tensor& target) const;
  std::string extra_repr() const override;
  int64_t ignore_index;
  double label_smoothing;
};

}  // namespace tr::nn
