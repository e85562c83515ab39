// AdaptiveAvgPool2d: mean over torch's adaptive bins so that the output is [.., OH, OW] for any
// input size (torch.nn.AdaptiveAvgPool2d).
#pragma once
#include "nn/module.h"
#include "ops/pair.h"

namespace tr::nn {

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Pair output_size);
  // x [N, C, H, W] -> [N, C, OH, OW] or [C, H, W] -> [C, OH, OW]; out[i, j] is the mean of
  // x[hs(i):he(i), ws(j):we(j)], hs(i) = floor(i H / OH), he(i) = ceil((i + 1) H / OH).
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Pair output_size;
};

// The functional form (torch.nn.functional.adaptive_avg_pool2d) over the last two dims, composed of
// differentiable ops (avg_pool2d when the bins tile the input evenly, else slice + mean + stack).
Tensor adaptive_avg_pool2d(const Tensor& x, const Pair& output_size);

}  // namespace tr::nn
