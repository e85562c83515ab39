// LRScheduler: initial lr bookkeeping, the step counters, torch's order check and the base state.
#include "optim/lr_scheduler.h"
#include <type_traits>

namespace tr::optim {

using json = nlohmann::json;

LRScheduler::LRScheduler(Optimizer& opt) : opt_(&opt) {
  // torch (last_epoch == -1): group.setdefault('initial_lr', group['lr'])
  for (auto& g : opt.param_groups()) {
    g.options.emplace("initial_lr", g.options.at("lr"));
    base_lrs_.push_back(g.options.at("initial_lr"));
  }
}

std::vector<double> LRScheduler::group_lrs() const {
  std::vector<double> r;
  for (size_t i = 0; i < num_groups(); ++i) r.push_back(group_lr(i));
  return r;
}

std::vector<double> LRScheduler::per_group(const std::vector<double>& v, const std::string& what) const {
  if (v.size() == 1) return std::vector<double>(num_groups(), v[0]);
  TR_CHECK(v.size() == num_groups(), type_name(), ": expected ", num_groups(), " values for ", what,
           " (one per param group) or one for all, got ", v.size());
  return v;
}

void LRScheduler::initial_step() {
  optimizer_steps_ = 0;
  step_count_ = 0;
  do_step(std::nullopt);
}

void LRScheduler::step() { do_step(std::nullopt); }
void LRScheduler::step(int64_t epoch) { do_step(epoch); }
void LRScheduler::optimizer_stepped() { ++optimizer_steps_; }

void LRScheduler::set_interval(const std::string& interval) {
  TR_CHECK(interval == "epoch" || interval == "step", type_name(), ": interval must be \"epoch\" or \"step\", got '",
           interval, "'");
  interval_ = interval;
}

void LRScheduler::do_step(std::optional<int64_t> epoch) {
  // torch warns here ("Detected call of `lr_scheduler.step()` before `optimizer.step()`"); the
  // first value of the schedule would be skipped, so we refuse.
  TR_CHECK(!(step_count_ == 1 && optimizer_steps_ < 1), type_name(),
           ": scheduler.step() called before optimizer.step(). Call optimizer.step() first, then "
           "scheduler.step() (otherwise the first value of the schedule is skipped); the training loop "
           "reports each optimizer step to the scheduler with optimizer_stepped()");
  TR_CHECK(base_lrs_.size() == num_groups(), type_name(), ": the optimizer has ", num_groups(),
           " param groups, the scheduler was built for ", base_lrs_.size(), " (add groups before building it)");
  // torch leaves the counters advanced when get_lr() raises; we restore them, so that a failed
  // step changes nothing.
  const int64_t old_epoch = last_epoch_, old_count = step_count_;
  ++step_count_;
  std::vector<double> values;
  try {
    if (!epoch) {
      ++last_epoch_;
      values = get_lr();
    } else {
      last_epoch_ = *epoch;
      auto closed = closed_form_lr();
      values = closed ? *closed : get_lr();
    }
  } catch (...) {
    last_epoch_ = old_epoch;
    step_count_ = old_count;
    throw;
  }
  TR_CHECK(values.size() == num_groups(), type_name(), ": computed ", values.size(), " lrs for ", num_groups(),
           " param groups");
  auto& groups = opt_->param_groups();
  for (size_t i = 0; i < groups.size(); ++i) groups[i].options["lr"] = values[i];
  last_lr_ = group_lrs();
}

json LRScheduler::state_dict() const {
  json s{{"last_epoch", last_epoch_}, {"base_lrs", base_lrs_}, {"_last_lr", last_lr_}, {"_step_count", step_count_}};
  // state_fields() hands out the members to read or write; here they are only read
  for (const StateField& f : const_cast<LRScheduler*>(this)->state_fields())
    std::visit([&](auto* v) { s[f.key] = *v; }, f.value);
  return s;
}

void LRScheduler::load_state_dict(const json& s) {
  auto base = field<std::vector<double>>(s, "base_lrs");
  auto last = field<std::vector<double>>(s, "_last_lr");
  TR_CHECK(base.size() == num_groups() && last.size() == num_groups(), type_name(), ".load_state_dict: the state has ",
           base.size(), " param groups, the optimizer ", num_groups());
  last_epoch_ = field<int64_t>(s, "last_epoch");
  step_count_ = field<int64_t>(s, "_step_count");
  base_lrs_ = std::move(base);
  last_lr_ = std::move(last);
  for (const StateField& f : state_fields())
    std::visit([&](auto* v) { *v = field<std::remove_pointer_t<decltype(v)>>(s, f.key); }, f.value);
}

}  // namespace tr::optim
