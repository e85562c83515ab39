// MSELoss and its [loss] registration "mse".
#include "nn/losses/mse_loss.h"
#include "ops/ops.h"

namespace tr::nn {

MSELoss::MSELoss(std::string red) : Loss("MSELoss", std::move(red)) {}

Tensor MSELoss::forward(const Tensor& input, const Tensor& target) { return mse_loss(input, target, reduction); }

TR_REGISTER_LOSS("mse", {[](const TomlTable&) -> LossPtr { return std::make_shared<MSELoss>(); },
                         "no keys; the target is cast to the output's dtype and must have its shape"});

}  // namespace tr::nn
