// CosineAnnealingLR: torch 1.13's formulas, in its operation order (the numbers agree to the last bit),
// its builder from a [scheduler] table and its registration as "cosine".
// No fused multiply-add: Python rounds every product, and so must we to give its bits.
#pragma GCC optimize("fp-contract=off")
#include "optim/schedulers/closed_form_schedulers.h"
#include <algorithm>
#include <cmath>
#include <numbers>
#include "optim/scheduler_registry.h"

namespace tr::optim {

using json = nlohmann::json;

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min)
    : LRScheduler(opt), T_max_(T_max), eta_min_(eta_min) {
  TR_CHECK(T_max > 0, "CosineAnnealingLR: T_max must be positive, got ", T_max);
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  const double e = static_cast<double>(last_epoch_), T = static_cast<double>(T_max_);
  std::vector<double> r = group_lrs();
  if (last_epoch_ == 0) return r;
  if (step_count_ == 1 && last_epoch_ > 0) {
    // first step of a scheduler resumed torch-style (last_epoch given): the closed form
    for (size_t i = 0; i < r.size(); ++i)
      r[i] = eta_min_ + (base_lrs_[i] - eta_min_) * (1 + std::cos(e * std::numbers::pi / T)) / 2;
  } else if ((last_epoch_ - 1 - T_max_) % (2 * T_max_) == 0) {
    // just past a minimum: the ratio below would be 0/0
    for (size_t i = 0; i < r.size(); ++i)
      r[i] = r[i] + (base_lrs_[i] - eta_min_) * (1 - std::cos(std::numbers::pi / T)) / 2;
  } else {
    // lr_e - eta_min = (lr_{e-1} - eta_min) * (1 + cos(pi e / T)) / (1 + cos(pi (e-1) / T))
    for (double& v : r)
      v = (1 + std::cos(std::numbers::pi * e / T)) / (1 + std::cos(std::numbers::pi * (e - 1) / T)) * (v - eta_min_) +
          eta_min_;
  }
  return r;
}

std::optional<std::vector<double>> CosineAnnealingLR::closed_form_lr() const {
  const double e = static_cast<double>(last_epoch_), T = static_cast<double>(T_max_);
  std::vector<double> r;
  for (double b : base_lrs_) r.push_back(eta_min_ + (b - eta_min_) * (1 + std::cos(std::numbers::pi * e / T)) / 2);
  return r;
}

std::vector<LRScheduler::StateField> CosineAnnealingLR::state_fields() {
  return {{"T_max", &T_max_}, {"eta_min", &eta_min_}};
}

void CosineAnnealingLR::load_state_dict(const json& s) {
  LRScheduler::load_state_dict(s);
  TR_CHECK(T_max_ > 0, "CosineAnnealingLR.load_state_dict: T_max must be positive, got ", T_max_);
}

namespace {

std::unique_ptr<LRScheduler> build_cosine_annealing_lr(const TomlTable& t, const SchedulerBuild& b) {
  int64_t T_max = int_or_span(t, "T_max", b.span);
  double eta_min = t.get_float("eta_min", 0.0);
  return located(t, [&] { return std::make_unique<CosineAnnealingLR>(b.opt, T_max, eta_min); });
}

}  // namespace

TR_REGISTER_SCHEDULER("cosine", {build_cosine_annealing_lr,
                                 "T_max (default: the run's length in intervals, or the phase's), eta_min = 0"});

}  // namespace tr::optim
