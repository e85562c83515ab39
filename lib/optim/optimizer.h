// Optimizer base: parameter groups with per-group hyperparameters and per-parameter state
// (torch.optim.Optimizer). Subclasses implement step().
#pragma once
#include <map>
#include <string>
#include <vector>
#include "core/tensor.h"

namespace tr::optim {

using Options = std::map<std::string, double>;

struct ParamGroup {
  std::vector<Tensor> params;
  Options options;   // lr, momentum, weight_decay, ... (missing ones come from the defaults)
  std::string name;  // for logs and errors
};

class Optimizer {
 public:
  Optimizer(std::vector<ParamGroup> groups, Options defaults);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  virtual std::string type_name() const = 0;

  // Sets every gradient to None (set_to_none) or to zero.
  void zero_grad(bool set_to_none = true);
  // Adds a group; hyperparameters it does not set come from the defaults. A parameter may
  // belong to one group only.
  void add_param_group(ParamGroup g);
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  const Options& defaults() const { return defaults_; }
  // Per-parameter state tensors ("momentum_buffer", "exp_avg", ...).
  std::map<std::string, Tensor>& state(const Tensor& p) { return state_[p.impl()]; }
  // The learning rate of every group, in order (logged to metrics).
  std::vector<double> lrs() const;

 protected:
  std::vector<ParamGroup> groups_;
  Options defaults_;
  std::map<TensorImpl*, std::map<std::string, Tensor>> state_;
};

}  // namespace tr::optim
