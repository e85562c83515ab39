#include "nn/layers/layer_norm.h"
#include "nn/layer_registry.h"
#include "nn/repr.h"
#include "ops/ops.h"

namespace tr::nn {

LayerNorm::LayerNorm(Shape ns, double eps_, bool affine)
    : Module("LayerNorm"), normalized_shape(std::move(ns)), eps(eps_), elementwise_affine(affine) {
  TR_CHECK(!normalized_shape.empty(), "LayerNorm: normalized_shape must have at least one dim");
  for (auto d : normalized_shape)
    TR_CHECK(d > 0, "LayerNorm: normalized_shape must be positive, got ", normalized_shape);
  TR_CHECK(eps > 0, "LayerNorm: eps must be positive, got ", eps);
  if (affine) {
    weight = ones(normalized_shape);
    bias = zeros(normalized_shape);
    register_parameter("weight", weight);
    register_parameter("bias", bias);
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  int64_t k = int64_t(normalized_shape.size());
  bool fits = x.dim() >= k;
  for (int64_t i = 0; fits && i < k; ++i) fits = x.size(x.dim() - k + i) == normalized_shape[size_t(i)];
  TR_CHECK(fits, "LayerNorm(", extra_repr(), "): expected input with shape [*, ", str(normalized_shape).substr(1),
           ", but got input of size ", x.sizes());
  return layer_norm(x, normalized_shape, weight, bias, eps);
}

std::string LayerNorm::extra_repr() const {
  std::string t = "(";
  for (size_t i = 0; i < normalized_shape.size(); ++i) t += (i ? ", " : "") + std::to_string(normalized_shape[i]);
  t += normalized_shape.size() == 1 ? ",)" : ")";
  return str(t, ", eps=", float_repr(eps), ", elementwise_affine=", elementwise_affine ? "True" : "False");
}

static ModulePtr build_layer_norm(const TomlTable& t, ShapeInfo& io) {
  if (io.shape.empty()) layer_error(t, str("expects an input with at least one dim, got ", io.str()));
  Shape ns{io.shape.back()};
  if (t.has("normalized_shape")) {
    const toml::node* n = t.node("normalized_shape");
    ns = n->is_integer() ? Shape{t.get_int("normalized_shape")} : t.get_ints("normalized_shape");
    bool fits = !ns.empty() && ns.size() <= io.shape.size();
    for (size_t i = 0; fits && i < ns.size(); ++i) fits = io.shape[io.shape.size() - ns.size() + i] == ns[i];
    if (!fits) t.fail("normalized_shape", str("= ", ns, " must equal the trailing dims of the input shape ", io.str()));
  }
  double eps = t.get_float("eps", 1e-5);
  if (eps <= 0) t.fail("eps", str("must be positive, got ", eps));
  return std::make_shared<LayerNorm>(ns, eps, t.get_bool("elementwise_affine", true));
}
TR_REGISTER_LAYER("layer_norm", "normalized_shape = [last dim], eps = 1e-5, elementwise_affine = true",
                  build_layer_norm);

}  // namespace tr::nn
