// The fused cross entropy over rows of logits (llm.c's fused_classifier), behind tr::cross_entropy
// with class-index targets (lib/ops/loss.cpp):
//   cross_entropy_rows           (x [N, V], t [N] i64) -> (loss [N], lse [N], correct [N] bool)
//   cross_entropy_rows_backward  (g_loss [N], g_lse [N], x, t, lse) -> dx [N, V] of x's dtype
// attrs ignore_index, label_smoothing; the formulas are ops/cross_entropy_math.h's. The forward reads
// each row once (online max and sum of exponentials) and keeps no log_softmax: the backward
// recomputes p = exp(x - lse) from the logits it was given. loss and lse are f32 (f64 for f64 rows)
// whatever the logits' dtype, so the op takes bf16 / f16 logits as they are, under autocast too;
// correct is argmax(x) == t (the accuracy metric, found in the same pass).
#include "core/grad_mode.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

namespace {

DType cross_entropy_stat_dtype(DType t) { return t == DType::F64 ? DType::F64 : DType::F32; }

void check_rows(const char* op, const Tensor& x, const Tensor& t) {
  TR_CHECK(x.dim() == 2 && is_floating(x.dtype()), op, ": expected floating logits [N, V], got ", dtype_name(x.dtype()),
           " of shape ", x.sizes());
  TR_CHECK(t.dtype() == DType::I64 && t.sizes() == Shape{x.size(0)}, op, ": expected int64 targets [", x.size(0),
           "], got ", dtype_name(t.dtype()), " of shape ", t.sizes());
}

}  // namespace

TR_REGISTER_OP(cross_entropy_rows) {
  d.num_inputs = 2;
  d.save_outputs = true;
  d.unsaved_outputs = 1u << 0 | 1u << 2;  // the backward needs lse, not the losses or the flags
  d.infer = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<TensorSpec> {
    check_rows("cross_entropy_rows", in[0], in[1]);
    const Shape n{in[0].size(0)};
    const DType st = cross_entropy_stat_dtype(in[0].dtype());
    return {{n, st}, {n, st}, {n, DType::Bool}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor &x = c.inputs[0], &t = c.inputs[1], &lse = c.outputs[1];
    const DType st = cross_entropy_stat_dtype(x.dtype());
    const Tensor gl = c.grads[0].to(st), gz = c.grads[1].to(st);
    if (!GradMode::is_enabled())
      return {dispatch1("cross_entropy_rows_backward", {gl, gz, x, t, lse.detach()}, c.attrs), Tensor()};
    // create_graph: the same formula in differentiable ops, p recomputed from x
    const int64_t V = x.size(1);
    const double ls = c.attrs.f("label_smoothing");
    const Tensor valid = t != double(c.attrs.i("ignore_index"));
    const Tensor b = where(valid, gl, zeros({}, TensorOptions(st).device(gl.device()))).unsqueeze(1);
    const Tensor a = b + gz.unsqueeze(1);
    const Tensor safe = where(valid, t, zeros_like(t));
    const Tensor q = one_hot(safe, V).to(st) * (1.0 - ls) + ls / double(V);
    return {a * softmax(x.to(st), 1) - b * q, Tensor()};
  };
}

TR_REGISTER_OP(cross_entropy_rows_backward) {
  d.num_inputs = 5;
  d.differentiable = false;  // runs only without create_graph (cross_entropy_rows' backward)
  d.infer = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<TensorSpec> {
    const char* op = "cross_entropy_rows_backward";
    const Tensor &x = in[2], &t = in[3];
    check_rows(op, x, t);
    const DType st = cross_entropy_stat_dtype(x.dtype());
    for (int i : {0, 1, 4})
      TR_CHECK(in[size_t(i)].sizes() == Shape{x.size(0)} && in[size_t(i)].dtype() == st, op,
               ": the row gradients and lse must be [", x.size(0), "] of ", dtype_name(st), ", got ",
               dtype_name(in[size_t(i)].dtype()), " of shape ", in[size_t(i)].sizes());
    return {{x.sizes(), x.dtype()}};
  };
}

}  // namespace tr
