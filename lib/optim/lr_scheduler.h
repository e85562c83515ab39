// LRScheduler: the base of the learning-rate schedulers (torch.optim.lr_scheduler, torch 1.13
// semantics and numbers); each scheduler is one file in optim/schedulers/ (class, builder from
// TOML, registration: optim/scheduler_registry.h).
//
// As in torch, a scheduler wraps an optimizer and
//   - at construction records each group's "initial_lr" (group.options, set only if absent) as
//     base_lrs and performs the initial step: last_epoch = 0, the group lrs are set;
//   - step() advances last_epoch by one and sets the group lrs from the *chainable* form (most
//     schedulers multiply the group's current lr), exactly as torch's get_lr() computes them;
//   - step(epoch) sets last_epoch = epoch and uses the closed form where the scheduler has one
//     (torch's deprecated step(epoch); SequentialLR relies on it at its milestones).
// What last_epoch counts is the caller's choice: epochs (interval "epoch") or optimizer steps
// (interval "step"); interval() only records it for the trainer and for LambdaLR's variables.
//
// Order: optimizer.step() before scheduler.step(). torch warns when the first scheduler.step()
// after construction comes before any optimizer.step(); here it is an Error. The scheduler learns
// about optimizer steps through optimizer_stepped(), which the training loop calls after each
// optimizer.step() (SequentialLR forwards it to its children). It reports the loop's order, not
// whether parameters changed: call it also when a GradScaler skipped the update (inf/NaN
// gradients), or fp16 training would fail on its first step.
//
// state_dict() is a JSON object with torch's keys (last_epoch, base_lrs, _last_lr, _step_count
// and each scheduler's own fields; LambdaLR stores its expressions). As in torch,
// load_state_dict() restores the scheduler only: the group lrs (and OneCycleLR's momentum,
// initial_lr, max_lr, min_lr) belong to the optimizer's state. The torch order applies: build the
// scheduler, then load the optimizer's state, then the scheduler's.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>
#include "core/error.h"
#include "optim/json_field.h"
#include "optim/optimizer.h"

namespace tr::optim {

class SequentialLR;

// Python's a // b (floor division), as torch's schedulers compute with it.
inline int64_t py_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  virtual std::string type_name() const = 0;  // "StepLR", ...

  virtual void step();
  virtual void step(int64_t epoch);
  // Call after every optimizer.step(); scheduler.step() before the first one is an error.
  virtual void optimizer_stepped();

  // The lr of each group as last set by this scheduler.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  int64_t step_count() const { return step_count_; }  // torch's _step_count
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  Optimizer& optimizer() const { return *opt_; }

  // "epoch" (default) or "step": what one scheduler.step() stands for.
  const std::string& interval() const { return interval_; }
  virtual void set_interval(const std::string& interval);

  // torch's state_dict: last_epoch, base_lrs, _last_lr, _step_count and the scheduler's own
  // numbers (state_fields()); a scheduler with state of another form overrides these two.
  virtual nlohmann::json state_dict() const;
  virtual void load_state_dict(const nlohmann::json& s);

 protected:
  // One number of a scheduler's own state: torch's state_dict key and the member that holds it.
  struct StateField {
    const char* key;
    std::variant<double*, int64_t*> value;
  };
  // The scheduler's own numbers (its hyperparameters: StepLR's step_size and gamma), which
  // state_dict writes and load_state_dict reads beside LRScheduler's keys.
  virtual std::vector<StateField> state_fields() { return {}; }

  // Records initial_lr / base_lrs. Subclasses call initial_step() at the end of their constructor
  // (a base constructor cannot call the subclass's get_lr()).
  explicit LRScheduler(Optimizer& opt);
  // torch's _initial_step(): resets the step counters and steps once (last_epoch -1 -> 0).
  void initial_step();

  // The chainable form at last_epoch_ (torch's get_lr()).
  virtual std::vector<double> get_lr() = 0;
  // The closed form at last_epoch_ (torch's _get_closed_form_lr()); none: step(epoch) uses get_lr().
  virtual std::optional<std::vector<double>> closed_form_lr() const { return std::nullopt; }

  size_t num_groups() const { return opt_->param_groups().size(); }
  double group_lr(size_t i) const { return opt_->param_groups()[i].options.at("lr"); }
  // The current lr of every group (torch: [group['lr'] for group in param_groups]).
  std::vector<double> group_lrs() const;
  // A value per group: one value for all, or one per group; `what` names it in the error.
  std::vector<double> per_group(const std::vector<double>& v, const std::string& what) const;
  // A typed field of a state dict (for load_state_dict); a missing key or a wrong type names the
  // scheduler and the key.
  template <typename T> T field(const nlohmann::json& s, const char* key) const {
    return json_field<T>(s, key, type_name() + ".load_state_dict");
  }

  Optimizer* opt_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
  int64_t optimizer_steps_ = 0;  // torch's optimizer._step_count, reset by initial_step()
  std::string interval_ = "epoch";

 private:
  void do_step(std::optional<int64_t> epoch);
  friend class SequentialLR;  // rewinds and re-initialises its children, as torch does
};

}  // namespace tr::optim
