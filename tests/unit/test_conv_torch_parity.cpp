// A convolution's backward against torch's bits (tests/fixtures/step_parity_conv.safetensors,
// generators/make_step_parity_fixture.py): torch 1.13 runs f32 convolutions of batches > 1 through
// oneDNN, whose weight-gradient pass also sums the bias gradient. Below a batch norm that gradient
// is rounding noise, which AdamW turns into steps of +-lr: a bias summed in another order than
// torch's follows another path from the first step.
#include <catch2/catch.hpp>
#include <omp.h>
#include <map>
#include "io/safetensors.h"
#include "ops/cpu/onednn_conv.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace test_conv_torch_parity {

using namespace tr;

TEST_CASE("conv2d backward: torch's weight and bias gradients bit for bit", "[conv][parity]") {
  if (!cpu::onednn_conv_enabled()) {
    WARN("SKIPPED: TR_CONV=im2col (torch's bits are those of its oneDNN convolution)");
    return;
  }
  std::map<std::string, Tensor> t;
  for (auto& [name, v] : io::load_safetensors(std::string(TRAINER_FIXTURES_DIR) + "/step_parity_conv.safetensors"))
    t[name] = v;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);  // as the fixture was made: oneDNN splits the reduction by thread
  Attrs a{{"stride", Pair{1, 1}}, {"padding", Pair{1, 1}}, {"dilation", Pair{1, 1}}, {"groups", int64_t(1)}};
  a.set("weight_size", t["weight"].sizes());
  a.set("bias", int64_t(1));
  const std::vector<Tensor> g = dispatch("conv2d_backward_weight", {t["gy"], t["x"]}, a);
  // what autograd runs for a convolution with a bias, through the layer's op
  Tensor x = t["x"].clone().requires_grad_(true), w = t["weight"].clone().requires_grad_(true),
         b = t["bias"].clone().requires_grad_(true);
  (conv2d(x, w, b, {1, 1}, {1, 1}) * t["gy"]).sum().backward();
  omp_set_num_threads(saved);

  CHECK(equal(g[1], t["grad_bias"]));
  CHECK(equal(b.grad(), t["grad_bias"]));
  CHECK(equal(g[0], t["grad_weight"]));
  CHECK(equal(w.grad(), t["grad_weight"]));
  // the bias gradient is noise: a plain sum of the same numbers (trainer's before) is close, not equal
  const Tensor plain = sum(t["gy"], {0, 2, 3});
  CHECK(allclose(plain, t["grad_bias"], 0, 1e-4));
  CHECK_FALSE(equal(plain, t["grad_bias"]));
  CHECK(allclose(x.grad(), t["grad_x"], 1e-5, 1e-5));
}

}  // namespace test_conv_torch_parity
