#include "nn/layers/gelu.h"
#include "nn/layer_registry.h"
#include "ops/ops.h"

namespace tr::nn {

GELU::GELU(std::string approx) : Module("GELU"), approximate(std::move(approx)) {
  TR_CHECK(approximate == "none" || approximate == "tanh", "GELU: approximate must be 'none' or 'tanh', got '",
           approximate, "'");
}
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate); }
std::string GELU::extra_repr() const { return "approximate='" + approximate + "'"; }

TR_REGISTER_LAYER("gelu", "approximate = \"none\" | \"tanh\"", [](const TomlTable& t, ShapeInfo& io) -> ModulePtr {
  expect_floating(t, io);
  return std::make_shared<GELU>(t.get_choice("approximate", {"none", "tanh"}, "none"));
});

}  // namespace tr::nn
