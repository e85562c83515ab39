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
// p -= lr * d for each params[i] (optim_math::sgd_direction, sgd_buffer, sgd_param); momentum_buffers[i] (empty without momentum) is
// written from d where first[i] (the parameter's first step), else updated.
void fused_sgd_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& momentum_buffers, const std::vector<bool>& first, const FusedSgdOptions& o);

struct FusedAdamOptions {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  bool decoupled = false, amsgrad = false, maximize = false;
};
// One Adam(W) step (optim_math::adam_grad, adam_m, adam_v, adam_param) of each params[i] at step count steps[i] (already incremented);
// max_exp_avg_sqs is empty without amsgrad.
void fused_adam_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<double>& steps,
                 const FusedAdamOptions& o);

// True when fused_sgd_ / fused_adam_ take these tensors: one device, each list's tensors
// contiguous with their parameter's dtype and shape, a floating dtype.
bool fusable(const std::vector<std::vector<Tensor>>& lists);

// The kernels' view of the attrs (ops/fused_optim.cpp writes them, the CPU and CUDA kernels read
// them): the scalars in compute type T.
template <typename T>
optim_math::SgdScalars<T> sgd_scalars(const Attrs& a) {
  const double momentum = a.f("momentum"), wd = a.f("weight_decay");
  return {T(a.f("lr")), T(momentum),     T(1.0 - a.f("dampening")), T(wd),
          a.b("nesterov"), a.b("maximize"), momentum != 0, wd != 0};
}
// Adam's scalars for parameter i of the call, whose step count is t.
optim_math::AdamScalars<double> adam_scalars(const Attrs& a, double t);
template <typename T>
optim_math::AdamScalars<T> adam_scalars_as(const optim_math::AdamScalars<double>& s) {
  return {T(s.beta1),        T(s.one_minus_beta1), T(s.beta2),         T(s.one_minus_beta2),
          T(s.eps),          T(s.weight_decay),    T(s.decay_factor),  T(s.neg_step_size),
          T(s.bc2_sqrt),     s.decoupled,          s.amsgrad,          s.maximize,
          s.has_weight_decay};
}

}  // namespace tr
