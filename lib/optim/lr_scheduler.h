// Learning-rate schedulers (torch.optim.lr_scheduler, torch 1.13 semantics and numbers).
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
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>
#include "optim/lambda_expr.h"
#include "optim/optimizer.h"

namespace tr::optim {

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

  virtual nlohmann::json state_dict() const;
  virtual void load_state_dict(const nlohmann::json& s);

 protected:
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

// ---- LambdaLR: lr = base_lr * lambda(last_epoch) ----

// What LambdaLR's expression variables mean (see lambda_expr.h for the names). With e = last_epoch:
//   interval "epoch": epoch = e, step = e * steps_per_epoch (the optimizer steps before epoch e)
//   interval "step":  step = e,  epoch = floor(e / steps_per_epoch) (the epoch step e belongs to)
// last_epoch = e always (torch's lambda argument); base_lr is the group's base lr; the totals are
// the run's. Inside SequentialLR, e restarts at 0 at the child's milestone (as in torch).
struct LambdaContext {
  std::string interval = "epoch";
  int64_t steps_per_epoch = 1;
  int64_t total_steps = 0;
  int64_t total_epochs = 0;
  int64_t warmup_steps = 0;
};

class LambdaLR : public LRScheduler {
 public:
  // One expression for all groups or one per group; each is parsed here (errors name the group).
  LambdaLR(Optimizer& opt, const std::vector<std::string>& lambdas, LambdaContext ctx = {});
  // C++ callables of last_epoch (torch's Python lambdas); state_dict stores null for them.
  LambdaLR(Optimizer& opt, std::vector<std::function<double(int64_t)>> lambdas);
  std::string type_name() const override { return "LambdaLR"; }

  // Takes effect from the next step.
  void set_context(const LambdaContext& ctx);
  const LambdaContext& context() const { return ctx_; }
  void set_interval(const std::string& interval) override;
  // The variables the expression of group `g` sees at last_epoch `e`.
  LambdaVars variables(size_t g, int64_t e) const;

  // lr_lambdas: the expressions (null for C++ callables). As torch, loading keeps this
  // scheduler's lambdas.
  nlohmann::json state_dict() const override;

 protected:
  std::vector<double> get_lr() override;

 private:
  struct Fn {  // an expression, or else a C++ callable
    std::shared_ptr<LambdaExpr> expr;
    std::function<double(int64_t)> fn;
  };
  double factor(size_t g, int64_t e) const;
  std::vector<Fn> fns_;
  LambdaContext ctx_;
};

// ---- StepLR: lr *= gamma every step_size epochs ----
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);
  std::string type_name() const override { return "StepLR"; }
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& s) override;

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// ---- MultiStepLR: lr *= gamma^(count) at each milestone (a milestone may repeat) ----
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& opt, const std::vector<int64_t>& milestones, double gamma = 0.1);
  std::string type_name() const override { return "MultiStepLR"; }
  // milestones as torch's Counter: {"<milestone>": count}.
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& s) override;

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  std::map<int64_t, int64_t> milestones_;  // milestone -> count
  double gamma_;
};

// ---- ConstantLR: lr = base_lr * factor until total_iters, then base_lr ----
class ConstantLR : public LRScheduler {
 public:
  ConstantLR(Optimizer& opt, double factor = 1.0 / 3, int64_t total_iters = 5);
  std::string type_name() const override { return "ConstantLR"; }
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& s) override;

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  double factor_;
  int64_t total_iters_;
};

// ---- LinearLR: factor goes linearly from start_factor to end_factor over total_iters ----
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& opt, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);
  std::string type_name() const override { return "LinearLR"; }
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& s) override;

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

// ---- ExponentialLR: lr *= gamma every epoch ----
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& opt, double gamma);
  std::string type_name() const override { return "ExponentialLR"; }
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& s) override;

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  double gamma_;
};

// ---- CosineAnnealingLR: eta_min + (base_lr - eta_min) * (1 + cos(pi * e / T_max)) / 2 ----
// step() uses torch's recursive form (which, past T_max, climbs back up: SGDR without restarts).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min = 0.0);
  std::string type_name() const override { return "CosineAnnealingLR"; }
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& s) override;

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

// ---- OneCycleLR (per optimizer step) ----
struct OneCycleOptions {
  std::vector<double> max_lr;  // one for all groups or one per group (required)
  int64_t total_steps = 0;     // required (torch: total_steps or epochs * steps_per_epoch)
  double pct_start = 0.3;
  std::string anneal_strategy = "cos";  // "cos" | "linear"
  bool cycle_momentum = true;
  std::vector<double> base_momentum = {0.85};
  std::vector<double> max_momentum = {0.95};
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool three_phase = false;
};

// lr: initial_lr = max_lr / div_factor -> max_lr -> min_lr = initial_lr / final_div_factor
// (three_phase: initial_lr -> max_lr -> initial_lr -> min_lr), annealed by cos or linear.
// With cycle_momentum the group option its optimizer's registration names as momentum_key (SGD:
// "momentum", Adam: "beta1") moves inversely between max_momentum and base_momentum. Group options gain initial_lr, max_lr,
// min_lr (and max_momentum, base_momentum), as torch's param groups do.
// Stepping past total_steps is an error.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& opt, OneCycleOptions o);
  std::string type_name() const override { return "OneCycleLR"; }
  // torch's keys (total_steps, _schedule_phases, cycle_momentum, use_beta1) plus anneal_strategy
  // (torch stores the function anneal_func).
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& s) override;

 protected:
  std::vector<double> get_lr() override;

 private:
  struct Phase {
    double end_step;
    std::string start_lr, end_lr, start_momentum, end_momentum;  // group option keys
  };
  double anneal(double start, double end, double pct) const;
  int64_t total_steps_;
  std::vector<Phase> phases_;
  std::string anneal_strategy_;
  bool cycle_momentum_;
  std::string momentum_key_;  // what cycle_momentum moves ("" without it)
};

// ---- SequentialLR: schedulers[i] runs from milestones[i-1] on ----
// torch 1.13 semantics: at construction the group lrs go back to initial_lr, every child's
// last_epoch is rewound by one and only the first child re-does its initial step; at a milestone
// the next child is stepped with step(0) (closed form where it has one), afterwards with step().
// Its state_dict has torch's keys: _schedulers (the children's), _milestones, last_epoch, _last_lr.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& opt, std::vector<std::unique_ptr<LRScheduler>> schedulers, std::vector<int64_t> milestones);
  std::string type_name() const override { return "SequentialLR"; }
  void step() override;
  void step(int64_t epoch) override;  // an error, as in torch (SequentialLR.step takes no epoch)
  void optimizer_stepped() override;
  void set_interval(const std::string& interval) override;
  const std::vector<std::unique_ptr<LRScheduler>>& schedulers() const { return schedulers_; }
  const std::vector<int64_t>& milestones() const { return milestones_; }
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& s) override;

 protected:
  std::vector<double> get_lr() override;  // not used

 private:
  std::vector<std::unique_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

}  // namespace tr::optim
