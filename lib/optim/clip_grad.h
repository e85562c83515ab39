// Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_, torch 1.13).
#pragma once
#include <vector>
#include "core/tensor.h"

namespace tr::optim {

// Scales the gradients of `params` in place so that their total norm is at most max_norm:
//   total = || (||g_1||_p, ..., ||g_n||_p) ||_p        (p = inf: max |g|)
//   clip_coef = min(max_norm / (total + 1e-6), 1);  g_i *= clip_coef
// computed in the gradients' dtype like torch (the multiply happens even when clip_coef is 1).
// Parameters without a gradient are skipped; with none at all the result is 0. Returns the
// total norm before clipping. A non-finite total is an error with error_if_nonfinite, else the
// gradients are scaled by it anyway (torch's behaviour).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                      bool error_if_nonfinite = false);

// Clamps every gradient to [-clip_value, clip_value] in place.
void clip_grad_value(const std::vector<Tensor>& params, double clip_value);

}  // namespace tr::optim
