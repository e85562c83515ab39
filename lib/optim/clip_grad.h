// Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_, torch 1.13).
#pragma once
#include <functional>
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
// The same without reading the total back (no host wait on a GPU; error_if_nonfinite would need
// one): the total norm before clipping as a 0-dim tensor on the gradients' device (undefined
// without gradients). On CUDA it is the fused ops of ops/fused_clip.h, a few launches for any
// number of gradients; elsewhere, and with [run] fused_ops = false, the composite.
Tensor clip_grad_norm_tensor(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0);

// The same for gradients sharded over ranks (ZeRO), as torch FSDP's clip_grad_norm_: each rank's
// partial result, sum_i ||g_i||_p^p (p = inf: max_i max|g_i|), goes through `reduce(partial,
// is_max)`, which combines it over the ranks (one collective, which every rank must call, with or
// without gradients); total = reduced^(1/p). The coefficient is then computed as above.
using NormReducer = std::function<double(double partial, bool is_max)>;
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite,
                      const NormReducer& reduce);

// Clamps every gradient to [-clip_value, clip_value] in place.
void clip_grad_value(const std::vector<Tensor>& params, double clip_value);

}  // namespace tr::optim
