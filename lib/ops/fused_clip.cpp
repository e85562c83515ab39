// The ops _fused_total_norm and _fused_clip_scale_ (ops/fused_clip.h).
#include "ops/fused_clip.h"
#include <cmath>
#include "ops/registry.h"

namespace tr {

namespace {

void check_tensors(const char* op, const std::vector<Tensor>& ts) {
  TR_CHECK(!ts.empty(), op, ": expected at least one tensor");
  for (size_t i = 0; i < ts.size(); ++i)
    TR_CHECK(is_floating(ts[i].dtype()) && ts[i].dtype() == ts[0].dtype() && ts[i].device() == ts[0].device() &&
                 ts[i].is_contiguous(),
             op, ": tensor ", i, " (", dtype_name(ts[i].dtype()), " on ", ts[i].device().str(),
             ") must be contiguous with tensor 0's floating dtype ", dtype_name(ts[0].dtype()), " and device ",
             ts[0].device().str());
}

}  // namespace

TR_REGISTER_OP(_fused_total_norm) {
  d.num_inputs = -1;
  d.differentiable = false;
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    check_tensors("_fused_total_norm", in);
    const double p = a.f("norm_type");
    TR_CHECK(p > 0, "_fused_total_norm: norm_type = ", p, " must be positive (or inf)");
    return {{Shape{}, in[0].dtype()}};
  };
}

TR_REGISTER_OP(_fused_clip_scale_) {
  d.num_inputs = -1;
  d.differentiable = false;
  d.infer = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<TensorSpec> {
    TR_CHECK(in.size() >= 2, "_fused_clip_scale_: expected tensors and then the total norm");
    const std::vector<Tensor> ts(in.begin(), in.end() - 1);
    check_tensors("_fused_clip_scale_", ts);
    const Tensor& total = in.back();
    TR_CHECK(total.dim() == 0 && total.dtype() == ts[0].dtype() && total.device() == ts[0].device(),
             "_fused_clip_scale_: the total norm must be a 0-dim ", dtype_name(ts[0].dtype()), " tensor on ",
             ts[0].device().str(), ", got shape ", total.sizes(), " ", dtype_name(total.dtype()), " on ",
             total.device().str());
    return {};
  };
}

bool fusable_norm(const std::vector<Tensor>& ts) {
  if (ts.empty()) return false;
  for (const Tensor& t : ts)
    if (!t.defined() || !is_floating(t.dtype()) || t.dtype() != ts[0].dtype() || t.device() != ts[0].device() ||
        !t.is_contiguous())
      return false;
  return true;
}

Tensor fused_total_norm(const std::vector<Tensor>& tensors, double norm_type) {
  return dispatch("_fused_total_norm", tensors, {{"norm_type", norm_type}})[0];
}

void fused_clip_scale_(const std::vector<Tensor>& tensors, const Tensor& total, double max_norm) {
  std::vector<Tensor> in(tensors);
  in.push_back(total);
  dispatch("_fused_clip_scale_", std::move(in), {{"max_norm", max_norm}});
}

}  // namespace tr
