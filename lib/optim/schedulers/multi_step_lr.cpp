// MultiStepLR: torch 1.13's formulas, in its operation order (the numbers agree to the last bit),
// its builder from a [scheduler] table and its registration as "multistep".
// No fused multiply-add: Python rounds every product, and so must we to give its bits.
#pragma GCC optimize("fp-contract=off")
#include "optim/schedulers/closed_form_schedulers.h"
#include <algorithm>
#include <cmath>
#include "optim/scheduler_registry.h"

namespace tr::optim {

using json = nlohmann::json;

MultiStepLR::MultiStepLR(Optimizer& opt, const std::vector<int64_t>& milestones, double gamma)
    : LRScheduler(opt), gamma_(gamma) {
  for (int64_t m : milestones) ++milestones_[m];  // collections.Counter(milestones)
  initial_step();
}

std::vector<double> MultiStepLR::get_lr() {
  auto it = milestones_.find(last_epoch_);
  if (it == milestones_.end()) return group_lrs();
  std::vector<double> r;
  for (size_t i = 0; i < num_groups(); ++i)
    r.push_back(group_lr(i) * std::pow(gamma_, static_cast<double>(it->second)));
  return r;
}

// base_lr * gamma ** bisect_right(sorted(milestones.elements()), last_epoch)
std::optional<std::vector<double>> MultiStepLR::closed_form_lr() const {
  int64_t n = 0;
  for (auto& [m, c] : milestones_)
    if (m <= last_epoch_) n += c;
  std::vector<double> r;
  for (double b : base_lrs_) r.push_back(b * std::pow(gamma_, static_cast<double>(n)));
  return r;
}

json MultiStepLR::state_dict() const {
  json s = LRScheduler::state_dict();
  json m = json::object();
  for (auto& [k, c] : milestones_) m[std::to_string(k)] = c;
  s["milestones"] = m;
  return s;
}

std::vector<LRScheduler::StateField> MultiStepLR::state_fields() { return {{"gamma", &gamma_}}; }

void MultiStepLR::load_state_dict(const json& s) {
  LRScheduler::load_state_dict(s);
  auto m = field<std::map<std::string, int64_t>>(s, "milestones");
  milestones_.clear();
  for (auto& [k, c] : m) {
    try {
      milestones_[std::stoll(k)] = c;
    } catch (const std::exception&) {
      throw Error(str("MultiStepLR.load_state_dict: milestone '", k, "' is not an integer"));
    }
  }
}

namespace {

std::unique_ptr<LRScheduler> build_multi_step_lr(const TomlTable& t, const SchedulerBuild& b) {
  std::vector<int64_t> milestones = t.get_ints("milestones");
  double gamma = t.get_float("gamma", 0.1);
  return located(t, [&] { return std::make_unique<MultiStepLR>(b.opt, milestones, gamma); });
}

}  // namespace

TR_REGISTER_SCHEDULER("multistep", {build_multi_step_lr, "milestones (required), gamma = 0.1"});

}  // namespace tr::optim
