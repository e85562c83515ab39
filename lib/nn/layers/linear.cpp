#include "nn/layers/linear.h"
#include <cmath>
#include "nn/layer_registry.h"
#include "ops/init.h"
#include "ops/ops.h"

namespace tr::nn {

Linear::Linear(int64_t in, int64_t out, bool has_bias) : Module("Linear"), in_features(in), out_features(out) {
  TR_CHECK(in > 0 && out > 0, "Linear: in_features and out_features must be positive, got ", in, " and ", out);
  weight = empty({out, in});
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  register_parameter("weight", weight);
  if (has_bias) {
    bias = empty({out});
    double bound = 1.0 / std::sqrt(double(in));
    init::uniform_(bias, -bound, bound);
    register_parameter("bias", bias);
  }
}

namespace {
void check_input(const Tensor& x, int64_t in_features) {
  TR_CHECK(x.dim() >= 1 && x.size(-1) == in_features, "Linear(in_features=", in_features, "): input of shape ",
           x.sizes(), " does not end with ", in_features);
}
}  // namespace

Tensor Linear::forward(const Tensor& x) {
  check_input(x, in_features);
  return linear(x, weight, bias);
}

Tensor Linear::forward_relu(const Tensor& x) {
  check_input(x, in_features);
  return linear_relu(x, weight, bias);
}

std::string Linear::extra_repr() const {
  return str("in_features=", in_features, ", out_features=", out_features,
             ", bias=", bias.defined() ? "True" : "False");
}

TR_REGISTER_LAYER("linear", "out_features, bias = true, in_features (optional check)",
                  [](const TomlTable& t, ShapeInfo& io) -> ModulePtr {
                    if (io.shape.empty()) layer_error(t, str("expects an input with at least one dim, got ", io.str()));
                    int64_t in = io.shape.back();
                    if (t.has("in_features") && t.get_int("in_features") != in)
                      layer_error(t, str("in_features = ", t.get_int("in_features"), " does not match the input shape ",
                                         io.str(), " coming from the previous layer"));
                    int64_t out = t.get_int("out_features");
                    auto m = std::make_shared<Linear>(in, out, t.get_bool("bias", true));
                    io.shape.back() = out;
                    return m;
                  });

}  // namespace tr::nn
