// Residual: y = activation(body(x) + shortcut(x)), the shortcut being the identity when absent (ResNet's
// BasicBlock shape); "repeat" builds N fresh copies of a layer list.
#pragma once
#include <string>
#include "nn/module.h"

namespace tr::nn {

class Residual : public Module {
 public:
  // activation: a shape-keeping layer applied to the sum (ReLU in ResNet's BasicBlock), or none.
  explicit Residual(ModulePtr body, ModulePtr shortcut = nullptr, ModulePtr activation = nullptr);
  Tensor forward(const Tensor& x) override;

  ModulePtr body, shortcut, activation;  // children "body" and, when given, "shortcut" and "activation"
};

}  // namespace tr::nn
