#include "optim/sgd.h"
#include "autograd/grad_mode.h"
#include "ops/ops.h"

namespace tr::optim {

Options SGDOptions::to_map() const {
  return {{"lr", lr}, {"momentum", momentum}, {"dampening", dampening}, {"weight_decay", weight_decay},
          {"nesterov", nesterov ? 1.0 : 0.0}, {"maximize", maximize ? 1.0 : 0.0}};
}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions d) : Optimizer({}, d.to_map()) {
  TR_CHECK(d.lr >= 0, "SGD: invalid learning rate ", d.lr);
  TR_CHECK(d.momentum >= 0, "SGD: invalid momentum ", d.momentum);
  TR_CHECK(d.weight_decay >= 0, "SGD: invalid weight_decay ", d.weight_decay);
  TR_CHECK(!d.nesterov || (d.momentum > 0 && d.dampening == 0), "SGD: Nesterov momentum requires a momentum and zero dampening");
  for (auto& g : groups) add_param_group(std::move(g));
}

SGD::SGD(std::vector<Tensor> params, SGDOptions d) : SGD(std::vector<ParamGroup>{{std::move(params), {}, "default"}}, d) {}

// For each parameter (torch 1.13, _single_tensor_sgd):
//   d = maximize ? -g : g;  d += weight_decay * p
//   buf = first step ? d : momentum * buf + (1 - dampening) * d
//   d = nesterov ? d + momentum * buf : buf
//   p -= lr * d
void SGD::step() {
  NoGradGuard ng;
  for (auto& g : groups_) {
    const Options& o = g.options;
    double lr = o.at("lr"), momentum = o.at("momentum"), dampening = o.at("dampening");
    double wd = o.at("weight_decay");
    bool nesterov = o.at("nesterov") != 0, maximize = o.at("maximize") != 0;
    for (auto& p : g.params) {
      const Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      Tensor d = maximize ? -grad : grad;
      if (wd != 0) d = add(d, p, wd);
      if (momentum != 0) {
        auto& st = state(p);
        auto it = st.find("momentum_buffer");
        if (it == st.end()) {
          st["momentum_buffer"] = d.clone();
          d = nesterov ? add(d, st["momentum_buffer"], momentum) : st["momentum_buffer"];
        } else {
          Tensor& buf = it->second;
          buf.mul_(momentum).add_(d, 1.0 - dampening);
          d = nesterov ? add(d, buf, momentum) : buf;
        }
      }
      p.add_(d, -lr);
    }
  }
}

}  // namespace tr::optim
