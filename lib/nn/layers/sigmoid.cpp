#include "nn/layers/sigmoid.h"
#include "nn/layer_registry.h"
#include "ops/ops.h"

namespace tr::nn {

Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }

TR_REGISTER_LAYER("sigmoid", "(no keys)", [](const TomlTable& t, ShapeInfo& io) -> ModulePtr {
  expect_floating(t, io);
  return std::make_shared<Sigmoid>();
});

}  // namespace tr::nn
