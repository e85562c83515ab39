#include "optim/clip_grad.h"
#include <cmath>
#include "core/grad_mode.h"
#include "ops/backends.h"
#include "ops/fused_clip.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::optim {

namespace {

// g *= clamp(max_norm / (total + 1e-6), max = 1), in total's dtype on its device (torch's order)
void scale_by_norm(std::vector<Tensor>& grads, const Tensor& total, double max_norm) {
  // torch: max_norm / (total + 1e-6) is Tensor.__rtruediv__, i.e. reciprocal() * max_norm
  Tensor coef = clamp((1.0 / (total + 1e-6)) * max_norm, std::nullopt, 1.0);
  for (auto& g : grads) {
    Tensor gg = g;  // a handle: mul_ writes the gradient's storage
    gg.mul_(coef.to(gg.device()));
  }
}

void check_finite(double total_v, double norm_type, bool error_if_nonfinite) {
  if (error_if_nonfinite && !std::isfinite(total_v))
    throw Error(str("clip_grad_norm: the total norm of order ", norm_type, " of the gradients is non-finite (", total_v,
                    "), so they cannot be clipped; set error_if_nonfinite = false to scale them by it anyway"));
}

// each gradient's norm (p = inf: max |g|) on the first one's device, in the promoted dtype
std::vector<Tensor> norms_of(const std::vector<Tensor>& grads, double norm_type, bool max_abs, DType dt) {
  std::vector<Tensor> norms;
  for (auto& g : grads) norms.push_back((max_abs ? max(abs(g)) : norm(g, norm_type)).to(grads[0].device(), dt));
  return norms;
}

std::vector<Tensor> grads_of(const std::vector<Tensor>& params, DType* dt) {
  std::vector<Tensor> grads;
  for (auto& p : params)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  if (!grads.empty()) *dt = grads[0].dtype();  // torch.stack promotes the per-parameter norms
  for (auto& g : grads) *dt = promote_types(*dt, g.dtype());
  return grads;
}

// The fused ops where they pay: on a GPU (launches per gradient become a few in all), with one
// dtype and contiguous gradients; the CPU's composite has no launches to save.
bool fused(const std::vector<Tensor>& grads, double norm_type) {
  return backends::fusion().enabled && norm_type > 0 && !grads.empty() && !grads[0].device().is_cpu() &&
         fusable_norm(grads) && has_kernel("_fused_total_norm", grads[0].device());
}

// The total norm of the gradients (the composite is torch's code).
Tensor total_norm(const std::vector<Tensor>& grads, double norm_type, DType dt) {
  const bool max_abs = std::isinf(norm_type) && norm_type > 0;
  if (fused(grads, norm_type)) return fused_total_norm(grads, norm_type);
  std::vector<Tensor> norms = norms_of(grads, norm_type, max_abs, dt);
  if (max_abs) return norms.size() == 1 ? norms[0] : max(stack(norms));
  return norm(stack(norms), norm_type);
}

void scale(std::vector<Tensor>& grads, const Tensor& total, double max_norm, double norm_type) {
  if (fused(grads, norm_type))
    fused_clip_scale_(grads, total, max_norm);
  else
    scale_by_norm(grads, total, max_norm);
}

}  // namespace

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  NoGradGuard ng;
  DType dt = DType::F32;
  std::vector<Tensor> grads = grads_of(params, &dt);
  if (grads.empty()) return 0.0;
  const Tensor total = total_norm(grads, norm_type, dt);
  const double total_v = total.item();
  check_finite(total_v, norm_type, error_if_nonfinite);
  scale(grads, total, max_norm, norm_type);
  return total_v;
}

Tensor clip_grad_norm_tensor(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  NoGradGuard ng;
  DType dt = DType::F32;
  std::vector<Tensor> grads = grads_of(params, &dt);
  if (grads.empty()) return Tensor();
  const Tensor total = total_norm(grads, norm_type, dt);
  scale(grads, total, max_norm, norm_type);
  return total;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite,
                      const NormReducer& reduce) {
  NoGradGuard ng;
  DType dt = DType::F32;
  std::vector<Tensor> grads = grads_of(params, &dt);
  const bool max_abs = std::isinf(norm_type) && norm_type > 0;
  double partial = 0;
  if (!grads.empty()) {
    const double local = total_norm(grads, norm_type, dt).item();
    partial = max_abs ? local : std::pow(local, norm_type);
  }
  const double reduced = reduce(partial, max_abs);
  const double total_v = max_abs ? reduced : std::pow(reduced, 1.0 / norm_type);
  check_finite(total_v, norm_type, error_if_nonfinite);
  if (grads.empty()) return total_v;
  scale_by_norm(grads, full({}, total_v, TensorOptions(dt).device(grads[0].device())), max_norm);
  return total_v;
}

void clip_grad_value(const std::vector<Tensor>& params, double clip_value) {
  NoGradGuard ng;
  for (auto& p : params) {
    if (!p.defined() || !p.grad().defined()) continue;
    Tensor g = p.grad();
    g.copy_(clamp(g, -clip_value, clip_value));
  }
}

}  // namespace tr::optim
