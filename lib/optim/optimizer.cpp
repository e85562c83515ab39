#include "optim/optimizer.h"
#include <set>

namespace tr::optim {

Optimizer::Optimizer(std::vector<ParamGroup> groups, Options defaults) : defaults_(std::move(defaults)) {
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup g) {
  for (auto& [k, v] : g.options)
    TR_CHECK(defaults_.count(k), "optimizer: unknown option '", k, "' in param group '", g.name, "'");
  for (auto& [k, v] : defaults_) g.options.emplace(k, v);
  std::set<TensorImpl*> seen;
  for (auto& other : groups_)
    for (auto& p : other.params) seen.insert(p.impl());
  for (auto& p : g.params) {
    TR_CHECK(p.is_leaf(), "optimizer can only optimize leaf tensors (param group '", g.name, "')");
    TR_CHECK(!seen.count(p.impl()), "some parameters appear in more than one parameter group (group '", g.name, "')");
    seen.insert(p.impl());
  }
  if (g.name.empty()) g.name = std::to_string(groups_.size());
  groups_.push_back(std::move(g));
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& g : groups_)
    for (auto& p : g.params) p.zero_grad(set_to_none);
}

std::vector<double> Optimizer::lrs() const {
  std::vector<double> r;
  for (auto& g : groups_) r.push_back(g.options.at("lr"));
  return r;
}

}  // namespace tr::optim
