// LinearLR: torch 1.13's formulas, in its operation order (the numbers agree to the last bit),
// its builder from a [scheduler] table and its registration as "linear".
// No fused multiply-add: Python rounds every product, and so must we to give its bits.
#pragma GCC optimize("fp-contract=off")
#include "optim/schedulers/closed_form_schedulers.h"
#include <algorithm>
#include <cmath>
#include "optim/scheduler_registry.h"

namespace tr::optim {

using json = nlohmann::json;

LinearLR::LinearLR(Optimizer& opt, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(opt), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  TR_CHECK(start_factor >= 0 && start_factor <= 1.0,
           "LinearLR: starting multiplicative factor expected to be between 0 and 1, got ", start_factor);
  TR_CHECK(end_factor >= 0 && end_factor <= 1.0,
           "LinearLR: ending multiplicative factor expected to be between 0 and 1, got ", end_factor);
  TR_CHECK(total_iters > 0, "LinearLR: total_iters must be positive, got ", total_iters);
  initial_step();
}

// lr * (1 + (end - start) / (total_iters * start + (last_epoch - 1) * (end - start)))
std::vector<double> LinearLR::get_lr() {
  std::vector<double> r = group_lrs();
  if (last_epoch_ == 0) {
    for (double& v : r) v *= start_factor_;
    return r;
  }
  if (last_epoch_ > total_iters_) return r;
  double den = static_cast<double>(total_iters_) * start_factor_ +
               static_cast<double>(last_epoch_ - 1) * (end_factor_ - start_factor_);
  TR_CHECK(den != 0, "LinearLR: division by zero at last_epoch ", last_epoch_, " (start_factor ", start_factor_, ")");
  for (double& v : r) v = v * (1. + (end_factor_ - start_factor_) / den);
  return r;
}

// base_lr * (start + (end - start) * min(total_iters, last_epoch) / total_iters)
std::optional<std::vector<double>> LinearLR::closed_form_lr() const {
  std::vector<double> r;
  double m = static_cast<double>(std::min(total_iters_, last_epoch_));
  for (double b : base_lrs_)
    r.push_back(b * (start_factor_ + (end_factor_ - start_factor_) * m / static_cast<double>(total_iters_)));
  return r;
}

std::vector<LRScheduler::StateField> LinearLR::state_fields() {
  return {{"start_factor", &start_factor_}, {"end_factor", &end_factor_}, {"total_iters", &total_iters_}};
}

namespace {

std::unique_ptr<LRScheduler> build_linear_lr(const TomlTable& t, const SchedulerBuild& b) {
  double start = t.get_float("start_factor", 1.0 / 3), end = t.get_float("end_factor", 1.0);
  int64_t total_iters = t.get_int("total_iters", 5);
  return located(t, [&] { return std::make_unique<LinearLR>(b.opt, start, end, total_iters); });
}

}  // namespace

TR_REGISTER_SCHEDULER("linear", {build_linear_lr, "start_factor = 1/3, end_factor = 1, total_iters = 5"});

}  // namespace tr::optim
