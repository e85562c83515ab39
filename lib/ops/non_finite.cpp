// any_non_finite(tensors): whether any element of any tensor is an inf or a NaN, as one 0-dim bool
// on their device: the [train] nonfinite check of a step's gradients before the optimizer applies
// them (torch's _amp_foreach_non_finite_check_and_unscale_ without the unscale). One fused pass on
// the CPU; elsewhere the composite sum(t * 0), which is NaN exactly where t holds an inf or a NaN.
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

TR_REGISTER_OP(_foreach_non_finite) {
  d.num_inputs = -1;
  d.differentiable = false;
  d.infer = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<TensorSpec> {
    for (size_t i = 0; i < in.size(); ++i)
      TR_CHECK(is_floating(in[i].dtype()) && in[i].device() == in[0].device(), "_foreach_non_finite: tensor ", i,
               " is ", dtype_name(in[i].dtype()), " on ", in[i].device().str(),
               "; expected floating tensors on one device");
    return {{Shape{}, DType::Bool}};
  };
}

Tensor any_non_finite(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> ts;
  for (const Tensor& t : tensors)
    if (t.defined() && t.numel() > 0) ts.push_back(t.detach());
  if (ts.empty()) return zeros({}, TensorOptions(DType::Bool));
  if (has_kernel("_foreach_non_finite", ts[0].device())) return dispatch1("_foreach_non_finite", ts);
  Tensor probe;
  for (const Tensor& t : ts) {
    Tensor p = sum(cast(t, DType::F32) * 0.0);
    probe = probe.defined() ? probe + p : p;
  }
  return logical_not(isfinite(probe));
}

}  // namespace tr
