// softmax / log_softmax along a dim, and their backward: softmax_backward, one fused pass per row
// (torch's _softmax_backward_data / _log_softmax_backward_data), whose own backward is written in
// differentiable ops; the composite formulas run where a device has no kernel or fusion is off.
#include "ops/backends.h"
#include "ops/infer.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

namespace {

// softmax and log_softmax share their contract; the backward reads the output y only:
//   softmax:      dx = y * (g - sum(g * y, dim))
//   log_softmax:  dx = g - exp(y) * sum(g, dim)
template <bool Log> void define_softmax(OpDef& d) {
  d.autocast = amp::CastPolicy::Fp32;
  d.num_inputs = 1;
  d.promote = Promote::CommonFloat;
  d.infer = infer_same;
  d.save_inputs = false;
  d.save_outputs = true;
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    return {softmax_backward(c.grads[0], c.outputs[0], c.attrs.i("dim"), Log)};
  };
}

}  // namespace

TR_REGISTER_OP(softmax) { define_softmax<false>(d); }
TR_REGISTER_OP(log_softmax) { define_softmax<true>(d); }

// (g, y) -> softmax's gradient from its output y:  y (g - sum_dim(g y)), or with attr log
// (y = log_softmax(x))  g - exp(y) sum_dim(g). Its own gradient, for an incoming G:
//   softmax:      dg = y (G - sum(G y)),          dy = G (g - sum(g y)) - g sum(G y)
//   log_softmax:  dg = G - sum(G exp(y)),         dy = -exp(y) sum(g) G
TR_REGISTER_OP(softmax_backward) {
  d.num_inputs = 2;
  d.promote = Promote::CommonFloat;
  d.infer = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<TensorSpec> {
    TR_CHECK(in[0].sizes() == in[1].sizes(), "softmax_backward: grad_output of shape ", in[0].sizes(),
             " does not match the output of shape ", in[1].sizes());
    return {{in[1].sizes(), in[1].dtype()}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor &g = c.inputs[0], &y = c.inputs[1], &G = c.grads[0];
    const int64_t dim = c.attrs.i("dim");
    const bool log = c.attrs.b("log");
    Tensor gg, gy;
    if (log) {
      const Tensor e = exp(y);
      if (c.needs_input_grad[0]) gg = G - sum(G * e, {dim}, true);
      if (c.needs_input_grad[1]) gy = -e * sum(g, {dim}, true) * G;
    } else {
      if (c.needs_input_grad[0]) gg = softmax_backward(G, y, dim, false);
      if (c.needs_input_grad[1]) gy = G * (g - sum(g * y, {dim}, true)) - g * sum(G * y, {dim}, true);
    }
    return {gg, gy};
  };
}

Tensor softmax_backward(const Tensor& g, const Tensor& y, int64_t dim, bool log) {
  if (backends::fusion().enabled && has_kernel("softmax_backward", y.device()) && g.sizes() == y.sizes() &&
      g.dtype() == y.dtype())
    return dispatch1("softmax_backward", {g, y}, {{"dim", dim}, {"log", log}});
  if (log) return g - exp(y) * sum(g, {dim}, true);
  return y * (g - sum(g * y, {dim}, true));
}

Tensor softmax(const Tensor& x, int64_t dim) {
  return dispatch1("softmax", {x}, {{"dim", wrap_dim(dim, x.dim(), "softmax")}});
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return dispatch1("log_softmax", {x}, {{"dim", wrap_dim(dim, x.dim(), "log_softmax")}});
}

}  // namespace tr
