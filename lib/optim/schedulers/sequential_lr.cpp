// SequentialLR: torch 1.13's formulas, in its operation order (the numbers agree to the last bit),
// its builder from a [scheduler] table and its registration as "sequential".
// No fused multiply-add: Python rounds every product, and so must we to give its bits.
#pragma GCC optimize("fp-contract=off")
#include "optim/schedulers/sequential_lr.h"
#include <algorithm>
#include <cmath>
#include "optim/scheduler_registry.h"

namespace tr::optim {

using json = nlohmann::json;

SequentialLR::SequentialLR(Optimizer& opt, std::vector<std::unique_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(opt), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  TR_CHECK(!schedulers_.empty(), "SequentialLR: expects at least one scheduler");
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    TR_CHECK(schedulers_[i], "SequentialLR: scheduler ", i, " is null");
    TR_CHECK(&schedulers_[i]->optimizer() == &opt,
             "SequentialLR: expects all schedulers to belong to the same "
             "optimizer, but got scheduler at index ",
             i, " to be different than the optimizer passed in");
    // torch would call step(0) on it (a TypeError) or _initial_step() (which it does not expect)
    TR_CHECK(!dynamic_cast<SequentialLR*>(schedulers_[i].get()), "SequentialLR: scheduler ", i,
             " is a SequentialLR; nesting is not supported");
  }
  TR_CHECK(milestones_.size() == schedulers_.size() - 1,
           "SequentialLR: expects number of schedulers provided to be "
           "one more than the number of milestone points, but got number of schedulers ",
           schedulers_.size(), " and the number of milestones to be equal to ", milestones_.size());
  for (size_t i = 1; i < milestones_.size(); ++i)
    TR_CHECK(milestones_[i] > milestones_[i - 1], "SequentialLR: milestones must be increasing, got ", milestones_);

  last_epoch_ = 0;  // torch: last_epoch + 1
  for (auto& g : opt.param_groups()) g.options["lr"] = g.options.at("initial_lr");
  for (auto& s : schedulers_) s->last_epoch_ -= 1;  // undo the step each child did when it was built
  schedulers_[0]->initial_step();
  last_lr_ = schedulers_[0]->get_last_lr();
  interval_ = schedulers_[0]->interval();
}

void SequentialLR::step() {
  const int64_t e = last_epoch_ + 1;  // committed once the child has stepped
  size_t idx = std::upper_bound(milestones_.begin(), milestones_.end(), e) - milestones_.begin();
  LRScheduler& s = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == e)
    s.step(0);  // torch 1.13: the next scheduler starts from its closed form at epoch 0
  else
    s.step();
  last_epoch_ = e;
  last_lr_ = s.get_last_lr();
}

void SequentialLR::step(int64_t) { throw Error("SequentialLR: step(epoch) is not supported; call step()"); }

void SequentialLR::optimizer_stepped() {
  LRScheduler::optimizer_stepped();
  for (auto& s : schedulers_) s->optimizer_stepped();
}

void SequentialLR::set_interval(const std::string& interval) {
  LRScheduler::set_interval(interval);
  for (auto& s : schedulers_) s->set_interval(interval);
}

std::vector<double> SequentialLR::get_lr() { return group_lrs(); }

json SequentialLR::state_dict() const {
  json children = json::array();
  for (auto& s : schedulers_) children.push_back(s->state_dict());
  return json{
      {"_schedulers", children}, {"_milestones", milestones_}, {"last_epoch", last_epoch_}, {"_last_lr", last_lr_}};
}

void SequentialLR::load_state_dict(const json& s) {
  const std::string who = type_name();
  auto children = field<json>(s, "_schedulers");
  TR_CHECK(children.is_array() && children.size() == schedulers_.size(), who, ".load_state_dict: the state has ",
           children.size(), " schedulers, this SequentialLR ", schedulers_.size());
  auto milestones = field<std::vector<int64_t>>(s, "_milestones");
  TR_CHECK(milestones.size() == milestones_.size(), who, ".load_state_dict: ", milestones.size(),
           " milestones, expected ", milestones_.size());
  auto last = field<std::vector<double>>(s, "_last_lr");
  TR_CHECK(last.size() == num_groups(), who, ".load_state_dict: the state has ", last.size(),
           " param groups, the optimizer ", num_groups());
  last_epoch_ = field<int64_t>(s, "last_epoch");
  milestones_ = std::move(milestones);
  last_lr_ = std::move(last);
  for (size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_state_dict(children[i]);
}

namespace {

std::unique_ptr<LRScheduler> build_sequential_lr(const TomlTable& t, const SchedulerBuild& b) {
  std::vector<TomlTable> children = t.get_tables("schedulers");
  std::vector<int64_t> milestones = t.get_ints("milestones");
  if (children.empty()) t.fail("schedulers", "is empty");
  if (milestones.size() + 1 != children.size())
    t.fail("milestones",
           str("has ", milestones.size(), " entries; expected one fewer than schedulers (", children.size() - 1, ")"));
  std::vector<std::unique_ptr<LRScheduler>> built;
  for (size_t i = 0; i < children.size(); ++i) {
    const TomlTable& c = children[i];
    if (c.has("interval")) c.fail("interval", "is set on the sequential scheduler, not on its children");
    // The phase of child i: [milestones[i-1], milestones[i]); the last one runs to the end.
    int64_t begin = i == 0 ? 0 : milestones[i - 1];
    int64_t span = i + 1 < children.size() ? milestones[i] - begin : (b.span > begin ? b.span - begin : 0);
    built.push_back(build_scheduler(c, SchedulerBuild{b.opt, b.run, b.interval, span}));
  }
  return located(t, [&] { return std::make_unique<SequentialLR>(b.opt, std::move(built), milestones); });
}

}  // namespace

TR_REGISTER_SCHEDULER("sequential", {build_sequential_lr,
                                     "schedulers = [{type = ...}, ...] (without interval), milestones (one fewer); a "
                                     "child's T_max / total_steps default to its phase"});

}  // namespace tr::optim
