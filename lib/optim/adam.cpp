// Adam's and AdamW's update and their registrations as the optimizers "adam" and "adamw".
#include "optim/adam.h"
#include <cmath>
#include "core/grad_mode.h"
#include "ops/fused_optim.h"
#include "ops/ops.h"
#include "optim/optimizer_registry.h"

namespace tr::optim {

Options AdamOptions::to_map() const {
  return {{"lr", lr},
          {"beta1", beta1},
          {"beta2", beta2},
          {"eps", eps},
          {"weight_decay", weight_decay},
          {"amsgrad", amsgrad ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions d, bool decoupled)
    : Optimizer(d.to_map()), decoupled_(decoupled) {
  check_options(defaults_, "defaults");
  for (auto& g : groups) add_param_group(std::move(g));
}

void Adam::check_options(const Options& o, const std::string& group) const {
  const std::string where = type_name() + " (param group '" + group + "'): ";
  double b1 = o.at("beta1"), b2 = o.at("beta2");
  TR_CHECK(o.at("lr") >= 0, where, "invalid learning rate ", o.at("lr"));
  TR_CHECK(o.at("eps") >= 0, where, "invalid epsilon value ", o.at("eps"));
  TR_CHECK(b1 >= 0 && b1 < 1, where, "invalid beta parameter at index 0: ", b1, " (must be in [0, 1))");
  TR_CHECK(b2 >= 0 && b2 < 1, where, "invalid beta parameter at index 1: ", b2, " (must be in [0, 1))");
  TR_CHECK(o.at("weight_decay") >= 0, where, "invalid weight_decay value ", o.at("weight_decay"));
}

std::vector<std::string> Adam::state_keys(const Options& o) const {
  if (o.at("amsgrad") != 0) return {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"step", "exp_avg", "exp_avg_sq"};
}

// torch 1.13 _single_tensor_adam / _single_tensor_adamw, for each parameter with a gradient:
//   g = maximize ? -grad : grad;  t += 1
//   AdamW: p = p * (1 - lr * wd)          Adam: g = g + wd * p   (if wd != 0)
//   m = b1 * m + (1 - b1) * g
//   v = b2 * v + ((1 - b2) * g) * g        (addcmul's evaluation order)
//   bc1 = 1 - b1^t;  bc2 = 1 - b2^t;  step_size = lr / bc1
//   amsgrad: v_max = max(v_max, v), used instead of v below
//   denom = sqrt(v) / sqrt(bc2) + eps
//   p = p + ((-step_size) * m) / denom     (addcdiv's evaluation order)
// As one fused op over the group (ops/fused_optim.h) where its tensors allow, else as this
// composite of pointwise ops.
void Adam::do_step() {
  NoGradGuard ng;
  for (auto& g : groups_) {
    const Options& o = g.options;
    double lr = o.at("lr"), b1 = o.at("beta1"), b2 = o.at("beta2"), eps = o.at("eps"), wd = o.at("weight_decay");
    bool amsgrad = o.at("amsgrad") != 0, maximize = o.at("maximize") != 0;
    std::vector<Tensor> ps, grads, ms, vs, vmaxs;
    std::vector<double> steps;
    for (auto& p : g.params) {
      if (!p.grad().defined()) continue;
      ParamState& st = state(p);
      if (st.empty()) {
        st["step"] = zeros({}, DType::F32);  // torch.tensor(0.)
        st["exp_avg"] = zeros_like(p);
        st["exp_avg_sq"] = zeros_like(p);
      }
      // (also when amsgrad is switched on after the first step, where torch would fail)
      if (amsgrad && !st.count("max_exp_avg_sq")) st["max_exp_avg_sq"] = zeros_like(p);
      Tensor& step_t = st.at("step");
      step_t.add_(1.0);
      ps.push_back(p);
      grads.push_back(p.grad());
      ms.push_back(st.at("exp_avg"));
      vs.push_back(st.at("exp_avg_sq"));
      if (amsgrad) vmaxs.push_back(st.at("max_exp_avg_sq"));
      steps.push_back(step_t.item());
    }
    std::vector<std::vector<Tensor>> lists{ps, grads, ms, vs};
    if (amsgrad) lists.push_back(vmaxs);
    if (fusable(lists)) {
      fused_adam_(ps, grads, ms, vs, vmaxs, steps, {lr, b1, b2, eps, wd, decoupled_, amsgrad, maximize});
      continue;
    }
    for (size_t i = 0; i < ps.size(); ++i) {
      Tensor& p = ps[i];
      Tensor grad = maximize ? -grads[i] : grads[i];
      Tensor& m = ms[i];
      Tensor& v = vs[i];
      if (decoupled_)
        p.mul_(1.0 - lr * wd);
      else if (wd != 0)
        grad = add(grad, p, wd);
      m.mul_(b1).add_(grad, 1.0 - b1);
      v.mul_(b2).add_((grad * (1.0 - b2)) * grad);
      const double t = steps[i];
      double bc1 = 1.0 - std::pow(b1, t), bc2 = 1.0 - std::pow(b2, t);
      double step_size = lr / bc1;
      double bc2_sqrt = std::sqrt(bc2);
      Tensor denom;
      if (amsgrad) {
        Tensor& vmax = vmaxs[i];
        vmax.copy_(maximum(vmax, v));
        denom = sqrt(vmax) / bc2_sqrt + eps;
      } else {
        denom = sqrt(v) / bc2_sqrt + eps;
      }
      p.add_((m * -step_size) / denom);
    }
  }
}

namespace {

AdamOptions adam_options(const Options& d) {
  AdamOptions o;
  o.lr = d.at("lr");
  o.beta1 = d.at("beta1");
  o.beta2 = d.at("beta2");
  o.eps = d.at("eps");
  o.weight_decay = d.at("weight_decay");
  o.amsgrad = d.at("amsgrad") != 0;
  o.maximize = d.at("maximize") != 0;
  return o;
}

using H = Hyperparameter;

// torch's defaults; AdamW differs in weight_decay (0.01) and in its constant keys
std::vector<Hyperparameter> adam_hyperparameters(double weight_decay) {
  return {H::number("lr", 1e-3, 0),     H::pair("betas", {"beta1", "beta2"}, {0.9, 0.999}, 0, 1, /*hi_open=*/true),
          H::number("eps", 1e-8, 0),    H::number("weight_decay", weight_decay, 0),
          H::boolean("amsgrad", false), H::boolean("maximize", false)};
}

}  // namespace

TR_REGISTER_OPTIMIZER("adam",
                      {"Adam",
                       adam_hyperparameters(0.0),
                       [](std::vector<ParamGroup> groups, const Options& d) -> std::unique_ptr<Optimizer> {
                         return std::make_unique<Adam>(std::move(groups), adam_options(d));
                       },
                       {{"foreach", nullptr}, {"capturable", false}, {"differentiable", false}, {"fused", false}},
                       "beta1"});
TR_REGISTER_OPTIMIZER("adamw", {"AdamW",
                                adam_hyperparameters(0.01),
                                [](std::vector<ParamGroup> groups, const Options& d) -> std::unique_ptr<Optimizer> {
                                  return std::make_unique<AdamW>(std::move(groups), adam_options(d));
                                },
                                {{"foreach", nullptr}, {"capturable", false}},
                                "beta1"});

}  // namespace tr::optim
