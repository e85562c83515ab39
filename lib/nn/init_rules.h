// Initialisation declared in model files: rules that redraw chosen parameters after the layers'
// own (torch-default) initialisation, in the order written, so a later rule wins. Each rule is a
// parameter selector (nn/param_selector.h) plus one torch.nn.init function and its arguments:
//
//   [[init]]                                   # the model: names are the model's dotted names
//   modules = ["linear", "embedding"]
//   param_names = ["weight"]
//   type = "normal"                            # mean = 0, std = 0.02
//   std = 0.02
//   [[init]]
//   match = ["*.c_proj.weight"]
//   type = "normal"
//   std = 0.02
//   residual_scaling = true                    # std / sqrt(2 * n_layer): GPT-2's residual projections
//
//   [[layers]] ... init = [{ param_names = ["bias"], type = "zeros" }]   # one layer: its own names
//
// types and their keys (torch.nn.init's names and defaults): normal (mean 0, std 1), uniform (a 0,
// b 1), constant (value), zeros, ones, kaiming_uniform / kaiming_normal (a 0, mode "fan_in",
// nonlinearity "leaky_relu"), xavier_uniform / xavier_normal (gain 1).
// residual_scaling (normal only, model rules only): n_layer is the number of transformer blocks.
#pragma once
#include <string>
#include <vector>
#include "nn/module.h"
#include "nn/param_selector.h"
#include "toml/toml_table.h"

namespace tr::nn {

struct InitRule {
  ParamSelector select;
  std::string type;
  double mean = 0.0, std = 1.0;                              // normal
  double a = 0.0, b = 1.0;                                   // uniform bounds; kaiming's a is the negative slope
  double value = 0.0;                                        // constant
  double gain = 1.0;                                         // xavier
  std::string mode = "fan_in", nonlinearity = "leaky_relu";  // kaiming
  bool residual_scaling = false;
  std::string where;  // "<file:line:col>: [[init]] 2", for messages
};

// The rules of the array of tables `key` of `t` (each checked: type, its keys, no others).
std::vector<InitRule> parse_init_rules(const TomlTable& t, const std::string& key, bool allow_residual_scaling);
// Redraws the parameters of `m` each rule selects (names relative to `m`); a rule that selects
// nothing is an error naming it. `n_layer` is for residual_scaling.
void apply_init_rules(Module& m, const std::vector<InitRule>& rules, int64_t n_layer = 0);
// The init types, for docs and errors.
const std::vector<std::string>& init_types();

}  // namespace tr::nn
