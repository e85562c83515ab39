// Conv2d: 2-D cross-correlation over NCHW (or unbatched CHW) input (torch.nn.Conv2d).
#pragma once
#include "nn/module.h"
#include "ops/pair.h"

namespace tr::nn {

class Conv2d : public Module {
 public:
  // weight [out, in/groups, kH, kW] ~ kaiming_uniform(a=sqrt 5) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
  // bias [out] ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in/groups * kH * kW (torch's defaults).
  Conv2d(int64_t in_channels, int64_t out_channels, Pair kernel_size, Pair stride = {1, 1}, Pair padding = {0, 0},
         Pair dilation = {1, 1}, int64_t groups = 1, bool bias = true);
  // x [N, C_in, H, W] -> [N, C_out, OH, OW]; or [C_in, H, W] -> [C_out, OH, OW].
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  // torch's output size per spatial dim: floor((in + 2p - d (k - 1) - 1) / s) + 1 (may be <= 0).
  static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d);

  int64_t in_channels, out_channels;
  Pair kernel_size, stride, padding, dilation;
  int64_t groups;
  Tensor weight, bias;
};

}  // namespace tr::nn
