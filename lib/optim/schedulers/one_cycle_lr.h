// OneCycleLR: warm up to max_lr, then anneal to min_lr over total_steps (momentum inversely)
// (torch.optim.lr_scheduler.OneCycleLR).
#pragma once
#include "optim/lr_scheduler.h"

namespace tr::optim {

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
// "momentum", Adam: "beta1") moves inversely between max_momentum and base_momentum. Group options gain initial_lr,
// max_lr, min_lr (and max_momentum, base_momentum), as torch's param groups do. Stepping past total_steps is an error.
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

}  // namespace tr::optim
