#include "nn/layers/relu.h"
#include "nn/layer_registry.h"
#include "ops/ops.h"

namespace tr::nn {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

TR_REGISTER_LAYER("relu", "(no keys)", [](const TomlTable& t, ShapeInfo& io) -> ModulePtr {
  expect_floating(t, io);
  return std::make_shared<ReLU>();
});

}  // namespace tr::nn
