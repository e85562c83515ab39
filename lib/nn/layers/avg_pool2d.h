// AvgPool2d: mean over sliding kH x kW windows of NCHW (or CHW) input (torch.nn.AvgPool2d, ceil_mode=False).
#pragma once
#include "nn/module.h"
#include "ops/pair.h"

namespace tr::nn {

class AvgPool2d : public Module {
 public:
  // stride empty = kernel_size; padding (zeros) <= kernel / 2; count_include_pad: the padded zeros
  // count in the divisor (torch's default).
  AvgPool2d(Pair kernel_size, Pair stride = {}, Pair padding = {0, 0}, bool count_include_pad = true);
  // x [N, C, H, W] -> [N, C, OH, OW], OH = floor((H + 2p - k) / s) + 1; or [C, H, W].
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Pair kernel_size, stride, padding;
  bool count_include_pad;
};

}  // namespace tr::nn
