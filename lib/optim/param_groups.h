// Parameter groups from rules: which parameters of a model get which hyperparameters
// ([[optimizer.groups]] in a run config). torch builds these lists by hand (yolov5:
// biases and BatchNorm weights without weight decay, other weights with it); here a rule
// selects parameters by name glob, by the kind of module that owns them, and by attribute name.
//
//   [[optimizer.groups]]            # every bias: no weight decay
//   name = "bias"
//   param_names = ["bias"]
//   weight_decay = 0.0
//   [[optimizer.groups]]            # norm-layer weights: no weight decay
//   name = "norm_weight"
//   modules = ["batch_norm*", "layer_norm"]
//   param_names = ["weight"]
//   weight_decay = 0.0
#pragma once
#include <toml++/toml.h>
#include <string>
#include <vector>
#include "nn/module.h"
#include "nn/param_selector.h"
#include "optim/optimizer.h"

namespace tr::optim {

struct GroupRule {
  std::string name;
  // Which parameters (nn/param_selector.h): name globs, owner kinds ("batch_norm2d", "linear",
  // or torch's "BatchNorm2d"), attribute names ("weight", "bias"), dim bounds.
  nn::ParamSelector select;
  // The group's hyperparameters (Options keys: lr, momentum, beta1, beta2, ...).
  Options options;
  // The parameters are frozen: requires_grad false (no gradient, no DDP bucket), and the group is
  // left out of the optimizer (no state), as torch users exclude frozen parameters.
  bool frozen = false;
};

// A parameter belongs to a rule when the rule's selector selects it (nn::selects; a tied parameter
// under any of its names). A rule must give at least one selector key. The result is the group "default" (options {}:
// the optimizer's defaults) with every unclaimed parameter, then one group per rule in order, parameters in model
// order. A parameter claimed by two rules is an error naming it and both groups; an empty group and a `match` glob that
// matches no parameter are warnings (appended to `warnings`). A `modules` name without wildcards that is no known layer
// type or class name is an error. Frozen rules' groups are not in the result (their parameters are still claimed).
std::vector<ParamGroup> build_param_groups(const nn::Module& model, const std::vector<GroupRule>& rules,
                                           std::vector<std::string>* warnings = nullptr);

// Sets requires_grad false on the parameters of the frozen rules; returns how many.
int64_t freeze_parameters(const nn::Module& model, const std::vector<GroupRule>& rules);

// Parses [[optimizer.groups]] tables: name, the selector keys (match, modules, param_names,
// min_dim, max_dim) and any hyperparameter of
// the registered optimizer `optimizer_type` in its TOML form (optim/optimizer_registry.h); another
// optimizer's key is an error naming this one's keys. Errors carry file:line:col; unknown keys
// name the nearest valid key.
std::vector<GroupRule> parse_group_rules(const toml::array& groups, const std::string& file,
                                         const std::string& optimizer_type);

}  // namespace tr::optim
