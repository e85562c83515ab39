// OneCycleLR: torch 1.13's formulas, in its operation order (the numbers agree to the last bit),
// its builder from a [scheduler] table and its registration as "onecycle".
// No fused multiply-add: Python rounds every product, and so must we to give its bits.
#pragma GCC optimize("fp-contract=off")
#include "optim/schedulers/one_cycle_lr.h"
#include <algorithm>
#include <cmath>
#include <numbers>
#include "optim/optimizer_registry.h"
#include "optim/scheduler_registry.h"

namespace tr::optim {

using json = nlohmann::json;

namespace {

// The group option cycle_momentum moves: what the optimizer's registration names.
std::string momentum_key_of(const Optimizer& opt) {
  const OptimizerType* type = optimizer_type_of(opt);
  TR_CHECK(type && !type->momentum_key.empty(), "OneCycleLR: optimizer ", opt.type_name(),
           " has no momentum to cycle (its registration names no momentum_key); set cycle_momentum = false");
  return type->momentum_key;
}

}  // namespace

OneCycleLR::OneCycleLR(Optimizer& opt, OneCycleOptions o)
    : LRScheduler(opt),
      total_steps_(o.total_steps),
      anneal_strategy_(o.anneal_strategy),
      cycle_momentum_(o.cycle_momentum) {
  TR_CHECK(o.total_steps > 0, "OneCycleLR: expected a positive integer total_steps, got ", o.total_steps);
  const double pct = o.pct_start, total = static_cast<double>(o.total_steps);
  if (o.three_phase) {
    phases_ = {{pct * total - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
               {2 * pct * total - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"},
               {total - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"}};
  } else {
    phases_ = {{pct * total - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
               {total - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"}};
  }
  TR_CHECK(pct >= 0 && pct <= 1, "OneCycleLR: expected a pct_start between 0 and 1, got ", pct);
  TR_CHECK(o.anneal_strategy == "cos" || o.anneal_strategy == "linear",
           "OneCycleLR: anneal_strategy must be one of 'cos' or 'linear', got '", o.anneal_strategy, "'");
  TR_CHECK(!o.max_lr.empty(), "OneCycleLR: max_lr is required");
  std::vector<double> max_lrs = per_group(o.max_lr, "max_lr");
  auto& groups = opt.param_groups();
  for (size_t i = 0; i < groups.size(); ++i) {
    Options& g = groups[i].options;
    g["initial_lr"] = max_lrs[i] / o.div_factor;
    g["max_lr"] = max_lrs[i];
    g["min_lr"] = g["initial_lr"] / o.final_div_factor;
    base_lrs_[i] = g["initial_lr"];  // the base constructor read initial_lr before it was set here
  }
  if (cycle_momentum_) {
    momentum_key_ = momentum_key_of(opt);
    std::vector<double> maxm = per_group(o.max_momentum, "max_momentum");
    std::vector<double> basem = per_group(o.base_momentum, "base_momentum");
    for (size_t i = 0; i < groups.size(); ++i) {
      Options& g = groups[i].options;
      g[momentum_key_] = maxm[i];
      g["max_momentum"] = maxm[i];
      g["base_momentum"] = basem[i];
    }
  }
  initial_step();
}

// cos: end + (start - end) / 2 * (cos(pi * pct) + 1); linear: (end - start) * pct + start
double OneCycleLR::anneal(double start, double end, double pct) const {
  if (anneal_strategy_ == "cos") {
    double cos_out = std::cos(std::numbers::pi * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
  }
  return (end - start) * pct + start;
}

std::vector<double> OneCycleLR::get_lr() {
  const int64_t step_num = last_epoch_;
  TR_CHECK(step_num <= total_steps_, "OneCycleLR: tried to step ", step_num + 1,
           " times. The specified number of total steps is ", total_steps_);
  std::vector<double> lrs;
  for (auto& pg : opt_->param_groups()) {
    Options& g = pg.options;
    double start_step = 0, lr = 0, momentum = 0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& ph = phases_[i];
      if (static_cast<double>(step_num) <= ph.end_step || i + 1 == phases_.size()) {
        TR_CHECK(ph.end_step != start_step, "OneCycleLR: phase ", i,
                 " has zero length (pct_start * total_steps = ", ph.end_step + 1, "); raise pct_start or total_steps");
        double pct = (static_cast<double>(step_num) - start_step) / (ph.end_step - start_step);
        lr = anneal(g.at(ph.start_lr), g.at(ph.end_lr), pct);
        if (cycle_momentum_) momentum = anneal(g.at(ph.start_momentum), g.at(ph.end_momentum), pct);
        break;
      }
      start_step = ph.end_step;
    }
    lrs.push_back(lr);
    if (cycle_momentum_) g[momentum_key_] = momentum;
  }
  return lrs;
}

json OneCycleLR::state_dict() const {
  json s = LRScheduler::state_dict();
  s["total_steps"] = total_steps_;
  json phases = json::array();
  for (const Phase& p : phases_)
    phases.push_back({{"end_step", p.end_step},
                      {"start_lr", p.start_lr},
                      {"end_lr", p.end_lr},
                      {"start_momentum", p.start_momentum},
                      {"end_momentum", p.end_momentum}});
  s["_schedule_phases"] = phases;
  s["anneal_strategy"] = anneal_strategy_;
  s["cycle_momentum"] = cycle_momentum_;
  s["use_beta1"] = momentum_key_ == "beta1";
  return s;
}

void OneCycleLR::load_state_dict(const json& s) {
  const std::string who = type_name();
  LRScheduler::load_state_dict(s);
  total_steps_ = field<int64_t>(s, "total_steps");
  anneal_strategy_ = field<std::string>(s, "anneal_strategy");
  TR_CHECK(anneal_strategy_ == "cos" || anneal_strategy_ == "linear", who, ".load_state_dict: anneal_strategy '",
           anneal_strategy_, "'");
  cycle_momentum_ = field<bool>(s, "cycle_momentum");
  const bool use_beta1 = field<bool>(s, "use_beta1");
  momentum_key_ = cycle_momentum_ ? momentum_key_of(*opt_) : "";
  TR_CHECK(!cycle_momentum_ || use_beta1 == (momentum_key_ == "beta1"), who, ".load_state_dict: the state cycles ",
           use_beta1 ? "beta1" : "momentum", ", this optimizer's momentum is '", momentum_key_, "'");
  std::vector<Phase> phases;
  for (const json& p : field<json>(s, "_schedule_phases"))
    phases.push_back({field<double>(p, "end_step"), field<std::string>(p, "start_lr"), field<std::string>(p, "end_lr"),
                      field<std::string>(p, "start_momentum"), field<std::string>(p, "end_momentum")});
  TR_CHECK(!phases.empty(), who, ".load_state_dict: _schedule_phases is empty");
  phases_ = std::move(phases);
}

namespace {

std::unique_ptr<LRScheduler> build_one_cycle_lr(const TomlTable& t, const SchedulerBuild& b) {
  OneCycleOptions o;
  if (!t.has("max_lr")) t.get_float("max_lr");  // the "missing required key" error
  o.max_lr = float_or_list(t, "max_lr", {});
  o.total_steps = int_or_span(t, "total_steps", b.span);
  o.pct_start = t.get_float("pct_start", o.pct_start);
  o.anneal_strategy = t.get_choice("anneal_strategy", {"cos", "linear"}, o.anneal_strategy);
  o.cycle_momentum = t.get_bool("cycle_momentum", o.cycle_momentum);
  o.base_momentum = float_or_list(t, "base_momentum", o.base_momentum);
  o.max_momentum = float_or_list(t, "max_momentum", o.max_momentum);
  o.div_factor = t.get_float("div_factor", o.div_factor);
  o.final_div_factor = t.get_float("final_div_factor", o.final_div_factor);
  o.three_phase = t.get_bool("three_phase", o.three_phase);
  return located(t, [&] { return std::make_unique<OneCycleLR>(b.opt, o); });
}

}  // namespace

TR_REGISTER_SCHEDULER("onecycle",
                      {build_one_cycle_lr,
                       "max_lr (required; one or one per param group), total_steps (default: the run), "
                       "pct_start = 0.3, anneal_strategy = \"cos\" | \"linear\", cycle_momentum = true, "
                       "base_momentum = 0.85, max_momentum = 0.95, div_factor = 25, final_div_factor = 1e4, "
                       "three_phase = false; interval \"step\" by default",
                       "step"});

}  // namespace tr::optim
