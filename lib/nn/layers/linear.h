// Linear: y = x W^T + b over the last dim (torch.nn.Linear).
#pragma once
#include "nn/module.h"

namespace tr::nn {

class Linear : public Module {
 public:
  // Weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)), torch's default (kaiming_uniform with a=sqrt 5).
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  // relu(forward(x)) with the relu in the product's epilogue: what Sequential runs for a Linear
  // followed by a ReLU
  Tensor forward_relu(const Tensor& x);
  std::string extra_repr() const override;

  int64_t in_features, out_features;
  Tensor weight, bias;  // [out, in], [out]
};

}  // namespace tr::nn
