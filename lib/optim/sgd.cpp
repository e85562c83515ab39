// SGD's update and its registration as the optimizer "sgd".
#include "optim/sgd.h"
#include "core/grad_mode.h"
#include "ops/fused_optim.h"
#include "ops/ops.h"
#include "optim/optimizer_registry.h"

namespace tr::optim {

Options SGDOptions::to_map() const {
  return {{"lr", lr},
          {"momentum", momentum},
          {"dampening", dampening},
          {"weight_decay", weight_decay},
          {"nesterov", nesterov ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions d) : Optimizer(d.to_map()) {
  check_options(defaults_, "defaults");
  for (auto& g : groups) add_param_group(std::move(g));
}

SGD::SGD(std::vector<Tensor> params, SGDOptions d)
    : SGD(std::vector<ParamGroup>{{std::move(params), {}, "default"}}, d) {}

void SGD::check_options(const Options& o, const std::string& group) const {
  const std::string where = "SGD (param group '" + group + "'): ";
  TR_CHECK(o.at("lr") >= 0, where, "invalid learning rate ", o.at("lr"));
  TR_CHECK(o.at("momentum") >= 0, where, "invalid momentum value ", o.at("momentum"));
  TR_CHECK(o.at("weight_decay") >= 0, where, "invalid weight_decay value ", o.at("weight_decay"));
  TR_CHECK(o.at("nesterov") == 0 || (o.at("momentum") > 0 && o.at("dampening") == 0), where,
           "Nesterov momentum requires a momentum and zero dampening");
}

std::vector<std::string> SGD::state_keys(const Options& o) const {
  if (o.at("momentum") == 0) return {};
  return {"momentum_buffer"};
}

// For each parameter with a gradient (torch 1.13, _single_tensor_sgd):
//   d = maximize ? -g : g
//   d = d + weight_decay * p                          (if weight_decay != 0)
//   buf = first step ? clone(d) : momentum * buf + (1 - dampening) * d   (if momentum != 0)
//   d = nesterov ? d + momentum * buf : buf           (if momentum != 0)
//   p = p - lr * d
// As one fused op over the group (ops/fused_optim.h) where its tensors allow, else as this
// composite of pointwise ops.
void SGD::do_step() {
  NoGradGuard ng;
  for (auto& g : groups_) {
    const Options& o = g.options;
    double lr = o.at("lr"), momentum = o.at("momentum"), dampening = o.at("dampening");
    double wd = o.at("weight_decay");
    bool nesterov = o.at("nesterov") != 0, maximize = o.at("maximize") != 0;
    std::vector<Tensor> ps, grads, bufs;
    std::vector<bool> first;  // a parameter's first step: its new buffer is written from d
    for (auto& p : g.params) {
      if (!p.grad().defined()) continue;
      ps.push_back(p);
      grads.push_back(p.grad());
      first.push_back(false);
      if (momentum == 0) continue;
      ParamState& st = state(p);
      auto it = st.find("momentum_buffer");
      first.back() = it == st.end();
      bufs.push_back(first.back() ? (st["momentum_buffer"] = zeros_like(p)) : it->second);
    }
    std::vector<std::vector<Tensor>> lists{ps, grads};
    if (momentum != 0) lists.push_back(bufs);
    if (fusable(lists)) {
      fused_sgd_(ps, grads, bufs, first, {lr, momentum, dampening, wd, nesterov, maximize});
      continue;
    }
    for (size_t i = 0; i < ps.size(); ++i) {
      Tensor& p = ps[i];
      Tensor d = maximize ? -grads[i] : grads[i];
      if (wd != 0) d = add(d, p, wd);
      if (momentum != 0) {
        Tensor& buf = bufs[i];
        if (first[i])
          buf.copy_(d);  // torch: clone(d)
        else
          buf.mul_(momentum).add_(d, 1.0 - dampening);
        d = nesterov ? add(d, buf, momentum) : buf;
      }
      p.add_(d, -lr);
    }
  }
}

namespace {

std::unique_ptr<Optimizer> build_sgd(std::vector<ParamGroup> groups, const Options& d) {
  SGDOptions o;
  o.lr = d.at("lr");
  o.momentum = d.at("momentum");
  o.dampening = d.at("dampening");
  o.weight_decay = d.at("weight_decay");
  o.nesterov = d.at("nesterov") != 0;
  o.maximize = d.at("maximize") != 0;
  return std::make_unique<SGD>(std::move(groups), o);
}

using H = Hyperparameter;

}  // namespace

// lr's default is the run config's 0.01 (torch's SGD has none)
TR_REGISTER_OPTIMIZER("sgd",
                      {"SGD",
                       {H::number("lr", 0.01, 0), H::number("momentum", 0, 0), H::number("dampening", 0),
                        H::number("weight_decay", 0, 0), H::boolean("nesterov", false), H::boolean("maximize", false)},
                       build_sgd,
                       {{"foreach", nullptr}, {"differentiable", false}},
                       "momentum"});

}  // namespace tr::optim
