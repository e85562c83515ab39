#include "nn/layers/silu.h"
#include "nn/layer_registry.h"
#include "ops/ops.h"

namespace tr::nn {

Tensor SiLU::forward(const Tensor& x) { return silu(x); }

TR_REGISTER_LAYER("silu", "(no keys)", [](const TomlTable& t, ShapeInfo& io) -> ModulePtr {
  expect_floating(t, io);
  return std::make_shared<SiLU>();
});

}  // namespace tr::nn
