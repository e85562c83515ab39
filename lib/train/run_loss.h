// The run's loss ([loss], nn/loss.h) applied to a model's output and a batch's targets, with the
// number of correct predictions where the loss is a classification loss.
#pragma once
#include <utility>
#include "nn/loss.h"

namespace tr::train {

class RunLoss {
 public:
  RunLoss() = default;
  RunLoss(nn::LossPtr loss, bool classification) : loss_(std::move(loss)), classification_(classification) {}

  // The batch's mean loss, and for a classification loss its number of correct predictions (an
  // i64 scalar; undefined otherwise). Classification: logits [B, C] vs targets [B], or [B, T, V]
  // vs [B, T] scored per token. Otherwise the targets are cast to the output's dtype, and an output
  // [B, 1] meets targets [B] as [B] (one output per sample).
  std::pair<Tensor, Tensor> operator()(const Tensor& output, const Tensor& target) const;
  bool classification() const { return classification_; }

 private:
  nn::LossPtr loss_;
  bool classification_ = false;
};

}  // namespace tr::train
