// Fused optimizer steps over many parameters at once: ops _fused_sgd_ and _fused_adam_, which
// update their inputs in place (no outputs, no autograd) with one pass over each parameter's
// elements on the CPU and one multi-tensor launch on CUDA, instead of a dozen pointwise ops per
// parameter. The per-element math is ops/optim_math.h; optim/sgd.cpp and optim/adam.cpp call these
// when every tensor of a group shares the parameter's dtype, device and contiguity, else they run
// the composite of pointwise ops that states the same formulas.
#pragma once
#include <vector>
#include "core/tensor.h"
#include "ops/attrs.h"
#include "ops/optim_math.h"

namespace tr {

struct FusedSgdOptions {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
};
// p -= lr * d for each params[i] (optim_math::sgd_direction, sgd_buffer, sgd_param); momentum_buffers[i] (empty without
// momentum) is written from d where first[i] (the parameter's first step), else updated.
void fused_sgd_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& momentum_buffers, const std::vector<bool>& first, const FusedSgdOptions& o);

struct FusedAdamOptions {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  bool decoupled = false, amsgrad = false, maximize = false;
};
// One Adam(W) step (optim_math::adam_grad, adam_m, adam_v, adam_param) of each params[i] at step count steps[i]
// (already incremented); max_exp_avg_sqs is empty without amsgrad.
void fused_adam_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<double>& steps,
                 const FusedAdamOptions& o);

// True when fused_sgd_ / fused_adam_ take these tensors: one device, each list's tensors
// contiguous with their parameter's dtype and shape, a floating dtype.
bool fusable(const std::vector<std::vector<Tensor>>& lists);

// The kernels' view of the attrs (ops/fused_optim.cpp writes them, the CPU and CUDA kernels read
// them), in double; optim_math::scalars_as converts them to the compute type.
optim_math::SgdScalars<double> sgd_scalars(const Attrs& a);
// Adam's scalars for a parameter whose step count is t.
optim_math::AdamScalars<double> adam_scalars(const Attrs& a, double t);

}  // namespace tr
