#include "optim/optimizer.h"
#include <set>
#include "toml/toml_table.h"

namespace tr::optim {

void Optimizer::step() {
  do_step();
  ++step_count_;
}

void Optimizer::add_param_group(ParamGroup g) {
  if (g.name.empty()) g.name = std::to_string(groups_.size());
  for (auto& [k, v] : g.options) {
    if (defaults_.count(k)) continue;
    std::vector<std::string> valid;
    for (auto& [dk, dv] : defaults_) valid.push_back(dk);
    std::string near = nearest_name(k, valid);
    TR_CHECK(false, type_name(), ": unknown hyperparameter '", k, "' in param group '", g.name, "'",
             near.empty() ? "" : "; did you mean '" + near + "'?", " (", type_name(), "'s hyperparameters: ", valid,
             ")");
  }
  for (auto& [k, v] : defaults_) g.options.emplace(k, v);
  check_options(g.options, g.name);
  std::set<TensorImpl*> seen;
  for (auto& other : groups_)
    for (auto& p : other.params) seen.insert(p.impl());
  for (auto& p : g.params) {
    TR_CHECK(p.defined(), type_name(), ": undefined tensor in param group '", g.name, "'");
    TR_CHECK(p.is_leaf(), type_name(), " can only optimize leaf tensors (param group '", g.name, "')");
    TR_CHECK(p.is_floating_point(), type_name(), " can only optimize floating-point tensors (param group '", g.name,
             "' has one of dtype ", dtype_name(p.dtype()), ")");
    TR_CHECK(!seen.count(p.impl()), "some parameters appear in more than one parameter group (group '", g.name, "')");
    seen.insert(p.impl());
  }
  groups_.push_back(std::move(g));
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& g : groups_)
    for (auto& p : g.params) p.zero_grad(set_to_none);
}

std::vector<Tensor> Optimizer::params() const {
  std::vector<Tensor> r;
  for (auto& g : groups_) r.insert(r.end(), g.params.begin(), g.params.end());
  return r;
}

const ParamState* Optimizer::find_state(const Tensor& p) const {
  auto it = state_.find(p.impl());
  return it == state_.end() ? nullptr : &it->second;
}

std::vector<double> Optimizer::lrs() const {
  std::vector<double> r;
  for (auto& g : groups_) r.push_back(g.options.at("lr"));
  return r;
}

}  // namespace tr::optim
