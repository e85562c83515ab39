// Optimizer state in torch's state_dict layout (Optimizer.state_dict / load_state_dict), split in
// a JSON part and named tensors so that a checkpoint can write them to state.json and
// optimizer.safetensors. A parameter's index is its position across groups in order, as torch's.
//
//   param_groups: [{"lr": 0.1, "momentum": 0.9, ..., "nesterov": false, "foreach": null,
//                   "differentiable": false, "name": "default", "params": [0, 1, 2]}, ...]
//                 (each hyperparameter in the TOML form its registration gives, e.g. Adam's
//                 "betas": [b1, b2]; torch's constant keys of the optimizer's registration, e.g.
//                 foreach, capturable, are written with torch's values and ignored on load)
//   tensors:      "state.<index>.<key>", e.g. "state.0.momentum_buffer", "state.3.exp_avg",
//                 "state.3.step" (0-dim f32). torch's momentum_buffer = None (SGD without
//                 momentum) has no tensor.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include "optim/optimizer.h"

namespace tr::optim {

struct OptimizerState {
  nlohmann::json param_groups = nlohmann::json::array();
  std::map<std::string, Tensor> tensors;
  // Not part of torch's layout (torch's Optimizer._step_count is not saved): step() calls so far.
  int64_t step_count = 0;
};

// The optimizer's state. The tensors share storage with the live state (as torch's state_dict):
// clone them to keep a snapshot across later steps.
OptimizerState state_dict(const Optimizer& opt);

// Replaces the optimizer's state and its groups' hyperparameters by `s` (a checkpoint of an
// optimizer of the same type over parameters of the same shapes and grouping). Checks the number
// of groups and of parameters per group, that every tensor belongs to a parameter and is a state
// key of this optimizer with the parameter's shape, and that no parameter lacks a key; errors name
// the group or "state.<index>.<key>". Tensors are copied and cast to the parameter's dtype and
// device ("step" is kept as saved, as torch does).
void load_state_dict(Optimizer& opt, const OptimizerState& s);

// Bytes of the state tensors the optimizer holds (of its parameters: a sharded optimizer's are its
// rank's views, so this is what ZeRO divides by the world size).
int64_t state_bytes(const Optimizer& opt);

}  // namespace tr::optim
