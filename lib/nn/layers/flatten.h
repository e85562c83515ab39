// Flatten: merges dims start_dim..end_dim into one (torch.nn.Flatten; default keeps the batch dim).
#pragma once
#include "nn/module.h"

namespace tr::nn {

class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  // [N, C, H, W] -> [N, C*H*W] with the defaults.
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t start_dim, end_dim;
};

}  // namespace tr::nn
