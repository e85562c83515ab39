// Optimizer base: parameter groups with per-group hyperparameters and per-parameter state
// (torch.optim.Optimizer). Subclasses implement do_step(); step() runs it and counts steps.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>
#include "core/tensor.h"

namespace tr::optim {

// Hyperparameters by torch's name; booleans are 0/1 and Adam's betas are "beta1"/"beta2".
using Options = std::map<std::string, double>;
using ParamState = std::map<std::string, Tensor>;

struct ParamGroup {
  std::vector<Tensor> params;
  Options options;   // lr, momentum, weight_decay, ... (missing ones come from the defaults)
  std::string name;  // for logs and errors
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient (parameters without one are skipped).
  void step();
  virtual std::string type_name() const = 0;
  // How many times step() ran (torch's optimizer._step_count); schedulers check it.
  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t n) { step_count_ = n; }

  // Sets every gradient to None (set_to_none) or to zero.
  void zero_grad(bool set_to_none = true);
  // Adds a group; hyperparameters it does not set come from the defaults, a key the defaults
  // do not have is an error naming the valid ones. A parameter may belong to one group only.
  void add_param_group(ParamGroup g);
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  const Options& defaults() const { return defaults_; }
  // Every parameter in torch's index order: groups in order, parameters in group order.
  std::vector<Tensor> params() const;

  // Per-parameter state tensors ("momentum_buffer", "exp_avg", ...); created empty on access.
  ParamState& state(const Tensor& p) { return state_[p.impl()]; }
  // The state of `p`, or nullptr when it has none yet.
  const ParamState* find_state(const Tensor& p) const;
  void clear_state() { state_.clear(); }
  // The state keys a parameter of a group with these options has after its first update, in
  // torch's order (load_state_dict checks them).
  virtual std::vector<std::string> state_keys(const Options& group) const = 0;

  // The learning rate of every group, in order (logged to metrics).
  std::vector<double> lrs() const;

 protected:
  // Subclasses add their groups in their own constructor body (add_param_group calls the
  // virtual type_name and check_options, which a base constructor cannot).
  explicit Optimizer(Options defaults) : defaults_(std::move(defaults)) {}
  virtual void do_step() = 0;
  // Range checks of one group's (complete) options; throws naming the group.
  virtual void check_options(const Options& o, const std::string& group) const {}

  std::vector<ParamGroup> groups_;
  Options defaults_;
  std::map<TensorImpl*, ParamState> state_;

 private:
  int64_t step_count_ = 0;
};

}  // namespace tr::optim
