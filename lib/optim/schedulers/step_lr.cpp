// StepLR: torch 1.13's formulas, in its operation order (the numbers agree to the last bit),
// its builder from a [scheduler] table and its registration as "step".
// No fused multiply-add: Python rounds every product, and so must we to give its bits.
#pragma GCC optimize("fp-contract=off")
#include "optim/schedulers/closed_form_schedulers.h"
#include <algorithm>
#include <cmath>
#include "optim/scheduler_registry.h"

namespace tr::optim {

using json = nlohmann::json;

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma)
    : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
  TR_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  initial_step();
}

std::vector<double> StepLR::get_lr() {
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return group_lrs();
  std::vector<double> r;
  for (size_t i = 0; i < num_groups(); ++i) r.push_back(group_lr(i) * gamma_);
  return r;
}

// base_lr * gamma ** (last_epoch // step_size)
std::optional<std::vector<double>> StepLR::closed_form_lr() const {
  std::vector<double> r;
  for (double b : base_lrs_)
    r.push_back(b * std::pow(gamma_, static_cast<double>(py_floordiv(last_epoch_, step_size_))));
  return r;
}

std::vector<LRScheduler::StateField> StepLR::state_fields() { return {{"step_size", &step_size_}, {"gamma", &gamma_}}; }

void StepLR::load_state_dict(const json& s) {
  LRScheduler::load_state_dict(s);
  TR_CHECK(step_size_ > 0, "StepLR.load_state_dict: step_size must be positive, got ", step_size_);
}

namespace {

std::unique_ptr<LRScheduler> build_step_lr(const TomlTable& t, const SchedulerBuild& b) {
  int64_t step_size = t.get_int("step_size");
  double gamma = t.get_float("gamma", 0.1);
  return located(t, [&] { return std::make_unique<StepLR>(b.opt, step_size, gamma); });
}

}  // namespace

TR_REGISTER_SCHEDULER("step", {build_step_lr, "step_size (required), gamma = 0.1"});

}  // namespace tr::optim
