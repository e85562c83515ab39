#include "nn/layers/relu6.h"
#include "nn/layer_registry.h"
#include "ops/ops.h"

namespace tr::nn {

Tensor ReLU6::forward(const Tensor& x) {
  // clamp's backward passes the gradient at x = 0 and x = 6; hardtanh's does not
  Tensor y = clamp(x, 0.0, 6.0);
  return where(logical_and(x > 0.0, x < 6.0), y, y.detach());
}

TR_REGISTER_LAYER("relu6", "(no keys)", [](const TomlTable& t, ShapeInfo& io) -> ModulePtr {
  expect_floating(t, io);
  return std::make_shared<ReLU6>();
});

}  // namespace tr::nn
