// Residual: y = act(body(x) + shortcut(x)), the shortcut being the identity when absent (ResNet's
// BasicBlock shape); "repeat" builds N fresh copies of a layer list.
#pragma once
#include <string>
#include "nn/module.h"

namespace tr::nn {

class Residual : public Module {
 public:
  // activation: "none" | "relu" | "gelu" | "gelu_tanh" | "silu" | "tanh" | "sigmoid", applied after the sum.
  explicit Residual(ModulePtr body, ModulePtr shortcut = nullptr, std::string activation = "none");
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  static const std::vector<std::string>& activations();

  ModulePtr body, shortcut;  // children "body" and (when given) "shortcut"
  std::string activation;
};

}  // namespace tr::nn
