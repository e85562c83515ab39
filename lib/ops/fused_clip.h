// clip_grad_norm_'s device work as two fused ops over many tensors, so that clipping costs a few
// launches and no host wait (the total norm stays on the device until a log line reads it):
//   _fused_total_norm   (tensors...; norm_type) -> total [] : the norm of the tensors' norms
//   _fused_clip_scale_  (tensors..., total; max_norm)       : t *= clip_coef(total, max_norm), in place
// The math is ops/clip_math.h; optim/clip_grad.cpp uses them where fusable_norm allows and keeps the
// composite of per-tensor norms, stack and mul_ (torch's code) as their spec.
#pragma once
#include <vector>
#include "core/tensor.h"

namespace tr {

// True when the fused ops take these tensors: one device, one floating dtype, each contiguous.
bool fusable_norm(const std::vector<Tensor>& tensors);
// The total p-norm (p > 0 or inf) as a 0-dim tensor of the tensors' dtype on their device.
Tensor fused_total_norm(const std::vector<Tensor>& tensors, double norm_type);
// Each tensor times min(max_norm / (total + 1e-6), 1), computed from the 0-dim `total` where it lives.
void fused_clip_scale_(const std::vector<Tensor>& tensors, const Tensor& total, double max_norm);

}  // namespace tr
