#include "nn/layers/tanh.h"
#include "nn/layer_registry.h"
#include "ops/ops.h"

namespace tr::nn {

Tensor Tanh::forward(const Tensor& x) { return tanh(x); }

TR_REGISTER_LAYER("tanh", "(no keys)", [](const TomlTable& t, ShapeInfo& io) -> ModulePtr {
  expect_floating(t, io);
  return std::make_shared<Tanh>();
});

}  // namespace tr::nn
