// BCEWithLogitsLoss and its [loss] registration "bce_with_logits".
#include "nn/losses/bce_with_logits_loss.h"
#include "ops/ops.h"

namespace tr::nn {

BCEWithLogitsLoss::BCEWithLogitsLoss(std::string red, Tensor pw) : Loss("BCEWithLogitsLoss", std::move(red)) {
  if (pw.defined()) pos_weight = register_buffer("pos_weight", pw);
}

Tensor BCEWithLogitsLoss::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy_with_logits(input, target, reduction, pos_weight);
}

TR_REGISTER_LOSS("bce_with_logits", {[](const TomlTable&) -> LossPtr { return std::make_shared<BCEWithLogitsLoss>(); },
                                     "no keys; targets are 0/1 labels (or probabilities) with the output's shape"});

}  // namespace tr::nn
