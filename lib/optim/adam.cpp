#include "optim/adam.h"
#include <cmath>
#include "autograd/grad_mode.h"
#include "ops/ops.h"

namespace tr::optim {

Options AdamOptions::to_map() const {
  return {{"lr", lr}, {"beta1", beta1}, {"beta2", beta2}, {"eps", eps}, {"weight_decay", weight_decay},
          {"amsgrad", amsgrad ? 1.0 : 0.0}, {"maximize", maximize ? 1.0 : 0.0}};
}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions d, bool decoupled)
    : Optimizer({}, d.to_map()), decoupled_(decoupled) {
  TR_CHECK(d.lr >= 0, type_name(), ": invalid learning rate ", d.lr);
  TR_CHECK(d.eps >= 0, type_name(), ": invalid epsilon ", d.eps);
  TR_CHECK(d.beta1 >= 0 && d.beta1 < 1 && d.beta2 >= 0 && d.beta2 < 1, type_name(), ": invalid betas (", d.beta1, ", ",
           d.beta2, ")");
  for (auto& g : groups) add_param_group(std::move(g));
}

// torch 1.13 _single_tensor_adam(w):
//   g = maximize ? -grad : grad
//   AdamW: p *= 1 - lr * wd            Adam: g = g + wd * p
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  t += 1
//   bc1 = 1 - b1^t; bc2 = 1 - b2^t; step_size = lr / bc1
//   denom = sqrt(v_hat) / sqrt(bc2) + eps   (v_hat = max(v_max, v) with amsgrad)
//   p -= step_size * m / denom
void Adam::step() {
  NoGradGuard ng;
  for (auto& g : groups_) {
    const Options& o = g.options;
    double lr = o.at("lr"), b1 = o.at("beta1"), b2 = o.at("beta2"), eps = o.at("eps"), wd = o.at("weight_decay");
    bool amsgrad = o.at("amsgrad") != 0, maximize = o.at("maximize") != 0;
    for (auto& p : g.params) {
      if (!p.grad().defined()) continue;
      Tensor grad = maximize ? -p.grad() : p.grad();
      auto& st = state(p);
      if (!st.count("step")) {
        st["step"] = zeros({}, DType::F64);
        st["exp_avg"] = zeros_like(p);
        st["exp_avg_sq"] = zeros_like(p);
        if (amsgrad) st["max_exp_avg_sq"] = zeros_like(p);
      }
      Tensor& m = st["exp_avg"];
      Tensor& v = st["exp_avg_sq"];
      if (wd != 0) {
        if (decoupled_) p.mul_(1.0 - lr * wd);
        else grad = add(grad, p, wd);
      }
      st["step"].add_(1.0);
      double t = st["step"].item();
      m.mul_(b1).add_(grad, 1.0 - b1);
      v.mul_(b2).add_(grad * grad, 1.0 - b2);
      double bc1 = 1.0 - std::pow(b1, t), bc2 = 1.0 - std::pow(b2, t);
      double step_size = lr / bc1;
      Tensor vh = v;
      if (amsgrad) {
        Tensor& vmax = st["max_exp_avg_sq"];
        vmax.copy_(maximum(vmax, v));
        vh = vmax;
      }
      Tensor denom = sqrt(vh) / std::sqrt(bc2) + eps;
      p.add_(m / denom, -step_size);
    }
  }
}

}  // namespace tr::optim
