// softmax / log_softmax along a dim, with backward written in differentiable ops.
#include "ops/infer.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

TR_REGISTER_OP(softmax) {
  d.autocast = amp::CastPolicy::Fp32;
  d.num_inputs = 1;
  d.promote = Promote::CommonFloat;
  d.infer = infer_same;
  d.save_inputs = false;
  d.save_outputs = true;
  // dx = y * (g - sum(g * y, dim))
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor& y = c.outputs[0];
    const Tensor& g = c.grads[0];
    int64_t dim = c.attrs.i("dim");
    return {y * (g - sum(g * y, {dim}, true))};
  };
}
TR_REGISTER_OP(log_softmax) {
  d.autocast = amp::CastPolicy::Fp32;
  d.num_inputs = 1;
  d.promote = Promote::CommonFloat;
  d.infer = infer_same;
  d.save_inputs = false;
  d.save_outputs = true;
  // dx = g - exp(y) * sum(g, dim)
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor& y = c.outputs[0];
    const Tensor& g = c.grads[0];
    int64_t dim = c.attrs.i("dim");
    return {g - exp(y) * sum(g, {dim}, true)};
  };
}

Tensor softmax(const Tensor& x, int64_t dim) {
  return dispatch1("softmax", {x}, {{"dim", wrap_dim(dim, x.dim(), "softmax")}});
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return dispatch1("log_softmax", {x}, {{"dim", wrap_dim(dim, x.dim(), "log_softmax")}});
}

}  // namespace tr
