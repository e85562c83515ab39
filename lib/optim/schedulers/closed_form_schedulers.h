// Six of the schedulers torch gives a closed form (_get_closed_form_lr) beside its recursive get_lr:
// ConstantLR, CosineAnnealingLR, ExponentialLR, LinearLR, MultiStepLR and StepLR of
// torch.optim.lr_scheduler, one file each in this folder (formulas, builder, registration). They
// differ only in their hyperparameters, so they are declared together here. A new scheduler needs
// no line here: its class can live in its own .cpp (docs/contributing.md).
#pragma once
#include <map>
#include "optim/lr_scheduler.h"

// What each of them overrides: torch's class name, the recursive and the closed form of the lrs,
// and its hyperparameters as state_dict fields with torch's keys. Opens `private:` for the
// hyperparameters that follow.
#define TR_CLOSED_FORM_SCHEDULER(Class)                               \
 public:                                                              \
  std::string type_name() const override { return #Class; }           \
                                                                      \
 protected:                                                           \
  std::vector<double> get_lr() override;                              \
  std::optional<std::vector<double>> closed_form_lr() const override; \
  std::vector<StateField> state_fields() override;                    \
                                                                      \
 private:

namespace tr::optim {

// lr = base_lr * factor until total_iters, then base_lr.
class ConstantLR : public LRScheduler {
 public:
  ConstantLR(Optimizer& opt, double factor = 1.0 / 3, int64_t total_iters = 5);
  TR_CLOSED_FORM_SCHEDULER(ConstantLR)
  double factor_;
  int64_t total_iters_;
};

// Cosine decay from base_lr to eta_min over T_max. step() uses torch's recursive form (which, past
// T_max, climbs back up: SGDR without restarts).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min = 0.0);
  void load_state_dict(const nlohmann::json& s) override;  // and checks T_max
  TR_CLOSED_FORM_SCHEDULER(CosineAnnealingLR)
  int64_t T_max_;
  double eta_min_;
};

// lr *= gamma every epoch (or step).
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& opt, double gamma);
  TR_CLOSED_FORM_SCHEDULER(ExponentialLR)
  double gamma_;
};

// The factor goes linearly from start_factor to end_factor over total_iters.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& opt, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);
  TR_CLOSED_FORM_SCHEDULER(LinearLR)
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

// lr *= gamma at each milestone; state_dict keeps milestones as torch's Counter, {"<milestone>": count}.
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& opt, const std::vector<int64_t>& milestones, double gamma = 0.1);
  nlohmann::json state_dict() const override;  // and the milestones
  void load_state_dict(const nlohmann::json& s) override;
  TR_CLOSED_FORM_SCHEDULER(MultiStepLR)
  std::map<int64_t, int64_t> milestones_;  // milestone -> count
  double gamma_;
};

// lr *= gamma every step_size epochs (or steps).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);
  void load_state_dict(const nlohmann::json& s) override;  // and checks step_size
  TR_CLOSED_FORM_SCHEDULER(StepLR)
  int64_t step_size_;
  double gamma_;
};

}  // namespace tr::optim

#undef TR_CLOSED_FORM_SCHEDULER
