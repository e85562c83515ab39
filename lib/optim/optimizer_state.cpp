#include "optim/optimizer_state.h"
#include <algorithm>
#include <set>
#include "core/grad_mode.h"
#include "optim/optimizer_registry.h"

namespace tr::optim {

using json = nlohmann::json;

namespace {

// How state_dict writes each Options key: torch's form from the optimizer's registration (bools,
// betas as one pair); keys no hyperparameter describes (initial_lr, max_lr, ...) are numbers.
const Hyperparameter* hyperparameter_of(const OptimizerType* type, const std::string& option_key) {
  if (!type) return nullptr;
  for (const auto& h : type->hyperparameters)
    for (const auto& k : h.option_keys())
      if (k == option_key) return &h;
  return nullptr;
}

std::string group_label(const std::vector<ParamGroup>& groups, size_t i) {
  return str("param group ", i, " ('", groups[i].name, "')");
}

// "state.<index>.<key>" -> (index, key)
std::pair<int64_t, std::string> parse_tensor_name(const std::string& name) {
  const std::string prefix = "state.";
  size_t dot = name.find('.', prefix.size());
  bool ok = name.rfind(prefix, 0) == 0 && dot != std::string::npos && dot > prefix.size() && dot + 1 < name.size();
  std::string idx = ok ? name.substr(prefix.size(), dot - prefix.size()) : "";
  ok = ok && idx.size() < 18 && std::all_of(idx.begin(), idx.end(), [](char c) { return c >= '0' && c <= '9'; });
  TR_CHECK(ok, "optimizer state: malformed tensor name '", name, "' (expected state.<index>.<key>)");
  return {std::stoll(idx), name.substr(dot + 1)};
}

// The saved hyperparameters of one group, checked against the optimizer's keys.
Options load_group_options(const Optimizer& opt, size_t gi, const json& g) {
  const OptimizerType* type = optimizer_type_of(opt);
  const auto& groups = opt.param_groups();
  Options o = groups[gi].options;
  for (auto& [k, v] : g.items()) {
    if (k == "params" || k == "name" || (type && type->torch_constants.contains(k))) continue;
    const std::string where = str("optimizer state: ", group_label(groups, gi), ": hyperparameter '", k, "'");
    const Hyperparameter* h = type ? type->find(k) : nullptr;
    if (h && h->form == Hyperparameter::Form::Pair) {
      TR_CHECK(v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number(), where,
               " must be a list of two numbers, got ", v.dump());
      o[h->elements[0]] = v[0].get<double>();
      o[h->elements[1]] = v[1].get<double>();
      continue;
    }
    // a pair's elements are saved as the pair only (torch's betas)
    const Hyperparameter* owner = hyperparameter_of(type, k);
    TR_CHECK(o.count(k) && !(owner && owner->form == Hyperparameter::Form::Pair), where, " is not one of ",
             opt.type_name(), "'s (is this another optimizer's state?)");
    if (h && h->form == Hyperparameter::Form::Bool) {
      TR_CHECK(v.is_boolean() || v.is_number(), where, " must be a boolean, got ", v.dump());
      o[k] = v.is_boolean() ? (v.get<bool>() ? 1.0 : 0.0) : (v.get<double>() != 0 ? 1.0 : 0.0);
    } else {
      TR_CHECK(v.is_number(), where, " must be a number, got ", v.dump());
      o[k] = v.get<double>();
    }
  }
  return o;
}

}  // namespace

OptimizerState state_dict(const Optimizer& opt) {
  OptimizerState s;
  s.step_count = opt.step_count();
  int64_t index = 0;
  const OptimizerType* type = optimizer_type_of(opt);
  for (auto& g : opt.param_groups()) {
    json jg = type ? type->torch_constants : json::object();
    for (auto& [k, v] : g.options) {
      const Hyperparameter* h = hyperparameter_of(type, k);
      if (!h)
        jg[k] = v;
      else if (h->form == Hyperparameter::Form::Bool)
        jg[k] = v != 0;
      else if (h->form == Hyperparameter::Form::Number)
        jg[k] = v;
      else if (g.options.count(h->elements[0]) && g.options.count(h->elements[1]))
        jg[h->key] = {g.options.at(h->elements[0]), g.options.at(h->elements[1])};
    }
    jg["name"] = g.name;
    json ids = json::array();
    for (auto& p : g.params) {
      ids.push_back(index);
      if (const ParamState* st = opt.find_state(p))
        for (auto& [k, t] : *st)
          if (t.defined()) s.tensors[str("state.", index, ".", k)] = t;
      ++index;
    }
    jg["params"] = ids;
    s.param_groups.push_back(jg);
  }
  return s;
}

void load_state_dict(Optimizer& opt, const OptimizerState& s) {
  NoGradGuard ng;
  const auto& groups = opt.param_groups();
  TR_CHECK(s.param_groups.is_array(), "optimizer state: param_groups must be a list");
  TR_CHECK(s.param_groups.size() == groups.size(), "optimizer state: ", s.param_groups.size(),
           " param groups saved, the optimizer has ", groups.size());

  // hyperparameters and the saved index -> (group, parameter) map, as torch: by position
  std::vector<Options> options;
  std::map<int64_t, std::pair<size_t, Tensor>> by_index;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const json& g = s.param_groups[gi];
    TR_CHECK(g.is_object() && g.contains("params") && g["params"].is_array(),
             "optimizer state: ", group_label(groups, gi), ": saved group has no 'params' list");
    const json& ids = g["params"];
    TR_CHECK(ids.size() == groups[gi].params.size(), "optimizer state: ", group_label(groups, gi), ": ", ids.size(),
             " parameters saved, the optimizer's group has ", groups[gi].params.size());
    for (size_t j = 0; j < ids.size(); ++j) {
      TR_CHECK(ids[j].is_number_integer(), "optimizer state: ", group_label(groups, gi), ": parameter index ",
               ids[j].dump(), " is not an integer");
      bool fresh = by_index.emplace(ids[j].get<int64_t>(), std::make_pair(gi, groups[gi].params[j])).second;
      TR_CHECK(fresh, "optimizer state: parameter index ", ids[j].get<int64_t>(), " appears twice in param_groups");
    }
    options.push_back(load_group_options(opt, gi, g));
  }

  // the state tensors, checked and copied
  std::map<int64_t, ParamState> loaded;
  for (auto& [name, t] : s.tensors) {
    auto [index, key] = parse_tensor_name(name);
    auto it = by_index.find(index);
    TR_CHECK(it != by_index.end(), "optimizer state: ", name, ": no parameter has index ", index, " (the groups list ",
             by_index.size(), " parameters)");
    auto& [gi, p] = it->second;
    std::vector<std::string> keys = opt.state_keys(options[gi]);
    TR_CHECK(std::find(keys.begin(), keys.end(), key) != keys.end(), "optimizer state: ", name, ": ", opt.type_name(),
             " with the options of ", group_label(groups, gi), " keeps no '", key, "' (its state keys: ", keys, ")");
    TR_CHECK(t.defined(), "optimizer state: ", name, ": undefined tensor");
    if (key == "step") {
      TR_CHECK(t.numel() == 1, "optimizer state: ", name, ": must hold one number, got shape ", t.sizes());
      loaded[index][key] = t.detach().clone();
    } else {
      TR_CHECK(t.sizes() == p.sizes(), "optimizer state: ", name, ": shape ", t.sizes(),
               " does not match the parameter's ", p.sizes());
      loaded[index][key] = t.detach().to(p.device(), p.dtype()).clone();
    }
  }
  for (auto& [index, st] : loaded) {
    auto& [gi, p] = by_index.at(index);
    for (auto& key : opt.state_keys(options[gi]))
      TR_CHECK(st.count(key), "optimizer state: state.", index, ".", key, " is missing (", opt.type_name(), " keeps ",
               opt.state_keys(options[gi]), " for every parameter it has updated)");
  }

  // commit
  for (size_t gi = 0; gi < groups.size(); ++gi) opt.param_groups()[gi].options = options[gi];
  opt.clear_state();
  for (auto& [index, st] : loaded) opt.state(by_index.at(index).second) = std::move(st);
  opt.set_step_count(s.step_count);
}

int64_t state_bytes(const Optimizer& opt) {
  int64_t bytes = 0;
  for (const Tensor& p : opt.params())
    if (const ParamState* st = opt.find_state(p))
      for (const auto& [key, t] : *st)
        if (t.defined()) bytes += t.numel() * int64_t(t.element_size());
  return bytes;
}

}  // namespace tr::optim
