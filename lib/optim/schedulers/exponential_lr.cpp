// ExponentialLR: torch 1.13's formulas, in its operation order (the numbers agree to the last bit),
// its builder from a [scheduler] table and its registration as "exponential".
// No fused multiply-add: Python rounds every product, and so must we to give its bits.
#pragma GCC optimize("fp-contract=off")
#include "optim/schedulers/closed_form_schedulers.h"
#include <algorithm>
#include <cmath>
#include "optim/scheduler_registry.h"

namespace tr::optim {

using json = nlohmann::json;

ExponentialLR::ExponentialLR(Optimizer& opt, double gamma) : LRScheduler(opt), gamma_(gamma) { initial_step(); }

std::vector<double> ExponentialLR::get_lr() {
  std::vector<double> r = group_lrs();
  if (last_epoch_ == 0) return r;
  for (double& v : r) v *= gamma_;
  return r;
}

std::optional<std::vector<double>> ExponentialLR::closed_form_lr() const {
  std::vector<double> r;
  for (double b : base_lrs_) r.push_back(b * std::pow(gamma_, static_cast<double>(last_epoch_)));
  return r;
}

std::vector<LRScheduler::StateField> ExponentialLR::state_fields() { return {{"gamma", &gamma_}}; }

namespace {

std::unique_ptr<LRScheduler> build_exponential_lr(const TomlTable& t, const SchedulerBuild& b) {
  double gamma = t.get_float("gamma");
  return located(t, [&] { return std::make_unique<ExponentialLR>(b.opt, gamma); });
}

}  // namespace

TR_REGISTER_SCHEDULER("exponential", {build_exponential_lr, "gamma (required)"});

}  // namespace tr::optim
