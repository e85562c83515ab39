// MaxPool2d: max over sliding kH x kW windows of NCHW (or CHW) input (torch.nn.MaxPool2d, ceil_mode=False).
#pragma once
#include "nn/module.h"
#include "ops/pair.h"

namespace tr::nn {

class MaxPool2d : public Module {
 public:
  // stride empty = kernel_size (torch's stride=None); padding (implicit -inf) <= effective kernel / 2.
  MaxPool2d(Pair kernel_size, Pair stride = {}, Pair padding = {0, 0}, Pair dilation = {1, 1});
  // x [N, C, H, W] -> [N, C, OH, OW], OH = floor((H + 2p - d (k - 1) - 1) / s) + 1; or [C, H, W].
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Pair kernel_size, stride, padding, dilation;
};

}  // namespace tr::nn
