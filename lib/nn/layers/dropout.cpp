#include "nn/layers/dropout.h"
#include "nn/layer_registry.h"
#include "nn/repr.h"
#include "ops/ops.h"

namespace tr::nn {

Dropout::Dropout(double p_, Generator* g) : Module("Dropout"), p(p_), gen(g) {
  TR_CHECK(p >= 0.0 && p <= 1.0, "Dropout: dropout probability has to be between 0 and 1, but got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p == 0.0) return x;
  TR_CHECK(x.is_floating_point(), "Dropout: expected a floating point input, got ", dtype_name(x.dtype()));
  if (p == 1.0) return x * 0.0;
  return x * dropout_mask(x, p, gen);
}

std::string Dropout::extra_repr() const { return str("p=", float_repr(p), ", inplace=False"); }

static ModulePtr build_dropout(const TomlTable& t, ShapeInfo& io) {
  double p = t.get_float("p", 0.5);
  if (!(p >= 0.0 && p <= 1.0))
    t.fail("p", str("is the dropout probability and has to be between 0 and 1, but got ", p));
  return std::make_shared<Dropout>(p);
}
TR_REGISTER_LAYER("dropout", "p = 0.5 (in [0, 1])", build_dropout);

}  // namespace tr::nn
