#include "nn/layers/softplus.h"
#include "nn/layer_registry.h"
#include "nn/repr.h"
#include "ops/ops.h"

namespace tr::nn {

Softplus::Softplus(double b, double thr) : Module("Softplus"), beta(b), threshold(thr) {
  TR_CHECK(beta != 0.0, "Softplus: beta must be non-zero");
}
Tensor Softplus::forward(const Tensor& x) { return softplus(x, beta, threshold); }
std::string Softplus::extra_repr() const {
  return str("beta=", number_repr(beta), ", threshold=", number_repr(threshold));
}

TR_REGISTER_LAYER("softplus", "beta = 1, threshold = 20", [](const TomlTable& t, ShapeInfo& io) -> ModulePtr {
  expect_floating(t, io);
  double beta = t.get_float("beta", 1.0);
  if (beta == 0.0) t.fail("beta", "must be non-zero");
  return std::make_shared<Softplus>(beta, t.get_float("threshold", 20.0));
});

}  // namespace tr::nn
