// ConstantLR: torch 1.13's formulas, in its operation order (the numbers agree to the last bit),
// its builder from a [scheduler] table and its registration as "constant".
// No fused multiply-add: Python rounds every product, and so must we to give its bits.
#pragma GCC optimize("fp-contract=off")
#include "optim/schedulers/closed_form_schedulers.h"
#include <algorithm>
#include <cmath>
#include "optim/scheduler_registry.h"

namespace tr::optim {

using json = nlohmann::json;

ConstantLR::ConstantLR(Optimizer& opt, double factor, int64_t total_iters)
    : LRScheduler(opt), factor_(factor), total_iters_(total_iters) {
  TR_CHECK(factor >= 0 && factor <= 1.0,
           "ConstantLR: constant multiplicative factor expected to be between 0 and 1, got ", factor);
  initial_step();
}

std::vector<double> ConstantLR::get_lr() {
  std::vector<double> r = group_lrs();
  if (last_epoch_ == 0) {
    for (double& v : r) v *= factor_;
  } else if (last_epoch_ == total_iters_) {
    TR_CHECK(factor_ != 0, "ConstantLR: factor 0 cannot be undone at total_iters (division by zero)");
    for (double& v : r) v *= 1.0 / factor_;
  }
  return r;
}

// base_lr * (factor + (last_epoch >= total_iters) * (1 - factor))
std::optional<std::vector<double>> ConstantLR::closed_form_lr() const {
  std::vector<double> r;
  double past = last_epoch_ >= total_iters_ ? 1.0 : 0.0;
  for (double b : base_lrs_) r.push_back(b * (factor_ + past * (1 - factor_)));
  return r;
}

std::vector<LRScheduler::StateField> ConstantLR::state_fields() {
  return {{"factor", &factor_}, {"total_iters", &total_iters_}};
}

namespace {

std::unique_ptr<LRScheduler> build_constant_lr(const TomlTable& t, const SchedulerBuild& b) {
  double factor = t.get_float("factor", 1.0 / 3);
  int64_t total_iters = t.get_int("total_iters", 5);
  return located(t, [&] { return std::make_unique<ConstantLR>(b.opt, factor, total_iters); });
}

}  // namespace

TR_REGISTER_SCHEDULER("constant", {build_constant_lr, "factor = 1/3, total_iters = 5"});

}  // namespace tr::optim
