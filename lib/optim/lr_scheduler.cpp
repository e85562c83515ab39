// The formulas below are torch 1.13's get_lr() / _get_closed_form_lr(), written with the same
// operation order so that the numbers agree to the last bits.
// No fused multiply-add: Python rounds every product, and so must we to give its bits
// (the target builds with -march=haswell, where GCC contracts a * b + c by default).
#pragma GCC optimize("fp-contract=off")
#include "optim/lr_scheduler.h"
#include <algorithm>
#include <cmath>
#include <numbers>
#include "core/error.h"
#include "optim/optimizer_registry.h"

namespace tr::optim {

using json = nlohmann::json;

namespace {

constexpr double kPi = std::numbers::pi;

// Python's a // b.
int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// A typed field of a state dict; a missing key or a wrong type names the scheduler and the key.
template <typename T>
T field(const json& s, const char* key, const std::string& who) {
  TR_CHECK(s.is_object(), who, ".load_state_dict: expected a JSON object, got ", s.type_name());
  auto it = s.find(key);
  TR_CHECK(it != s.end(), who, ".load_state_dict: missing key '", key, "'");
  try {
    return it->get<T>();
  } catch (const json::exception& e) {
    throw Error(str(who, ".load_state_dict: key '", key, "': ", e.what()));
  }
}

// The group option OneCycleLR's cycle_momentum moves: what the optimizer's registration names.
std::string momentum_key_of(const Optimizer& opt) {
  const OptimizerType* type = optimizer_type_of(opt);
  TR_CHECK(type && !type->momentum_key.empty(), "OneCycleLR: optimizer ", opt.type_name(),
           " has no momentum to cycle (its registration names no momentum_key); set cycle_momentum = false");
  return type->momentum_key;
}

}  // namespace

// ---------------------------------------------------------------- LRScheduler

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
  return json{{"last_epoch", last_epoch_}, {"base_lrs", base_lrs_}, {"_last_lr", last_lr_}, {"_step_count", step_count_}};
}

void LRScheduler::load_state_dict(const json& s) {
  std::string who = type_name();
  auto base = field<std::vector<double>>(s, "base_lrs", who);
  auto last = field<std::vector<double>>(s, "_last_lr", who);
  TR_CHECK(base.size() == num_groups() && last.size() == num_groups(), who, ".load_state_dict: the state has ",
           base.size(), " param groups, the optimizer ", num_groups());
  last_epoch_ = field<int64_t>(s, "last_epoch", who);
  step_count_ = field<int64_t>(s, "_step_count", who);
  base_lrs_ = std::move(base);
  last_lr_ = std::move(last);
}

// ---------------------------------------------------------------- LambdaLR

LambdaLR::LambdaLR(Optimizer& opt, const std::vector<std::string>& lambdas, LambdaContext ctx) : LRScheduler(opt) {
  TR_CHECK(lambdas.size() == 1 || lambdas.size() == num_groups(), "LambdaLR: expected ", num_groups(),
           " lr_lambdas (one per param group) or one for all, got ", lambdas.size());
  for (size_t g = 0; g < num_groups(); ++g) {
    const std::string& e = lambdas.size() == 1 ? lambdas[0] : lambdas[g];
    std::string what = lambdas.size() == 1 ? std::string("LambdaLR: lambda")
                                           : str("LambdaLR: lambda for param group ", g, " ('",
                                                 opt.param_groups()[g].name, "')");
    fns_.push_back({std::make_shared<LambdaExpr>(e, what), {}});
  }
  set_context(ctx);
  initial_step();
}

LambdaLR::LambdaLR(Optimizer& opt, std::vector<std::function<double(int64_t)>> lambdas) : LRScheduler(opt) {
  TR_CHECK(lambdas.size() == 1 || lambdas.size() == num_groups(), "LambdaLR: expected ", num_groups(),
           " lr_lambdas (one per param group) or one for all, got ", lambdas.size());
  for (size_t g = 0; g < num_groups(); ++g) fns_.push_back({nullptr, lambdas.size() == 1 ? lambdas[0] : lambdas[g]});
  initial_step();
}

void LambdaLR::set_context(const LambdaContext& ctx) {
  LRScheduler::set_interval(ctx.interval);
  TR_CHECK(ctx.steps_per_epoch >= 1, "LambdaLR: steps_per_epoch must be >= 1, got ", ctx.steps_per_epoch);
  ctx_ = ctx;
}

void LambdaLR::set_interval(const std::string& interval) {
  LRScheduler::set_interval(interval);
  ctx_.interval = interval;
}

LambdaVars LambdaLR::variables(size_t g, int64_t e) const {
  LambdaVars v;
  v.last_epoch = static_cast<double>(e);
  if (ctx_.interval == "step") {
    v.step = static_cast<double>(e);
    v.epoch = static_cast<double>(floordiv(e, ctx_.steps_per_epoch));
  } else {
    v.epoch = static_cast<double>(e);
    v.step = static_cast<double>(e * ctx_.steps_per_epoch);
  }
  v.base_lr = base_lrs_[g];
  v.total_steps = static_cast<double>(ctx_.total_steps);
  v.total_epochs = static_cast<double>(ctx_.total_epochs);
  v.steps_per_epoch = static_cast<double>(ctx_.steps_per_epoch);
  v.warmup_steps = static_cast<double>(ctx_.warmup_steps);
  return v;
}

double LambdaLR::factor(size_t g, int64_t e) const {
  const Fn& f = fns_[g];
  if (!f.expr) return f.fn(e);
  LambdaVars v = variables(g, e);
  double r = (*f.expr)(v);
  TR_CHECK(std::isfinite(r), "LambdaLR: the lambda of param group ", g, " ('", f.expr->expr(), "') is ", r,
           " at last_epoch=", e, " (step=", v.step, ", epoch=", v.epoch, ", total_steps=", v.total_steps,
           ", warmup_steps=", v.warmup_steps, ")");
  return r;
}

// base_lr * lmbda(last_epoch)
std::vector<double> LambdaLR::get_lr() {
  std::vector<double> r;
  for (size_t g = 0; g < num_groups(); ++g) r.push_back(base_lrs_[g] * factor(g, last_epoch_));
  return r;
}

json LambdaLR::state_dict() const {
  json s = LRScheduler::state_dict();
  json l = json::array();
  for (const auto& f : fns_) l.push_back(f.expr ? json(f.expr->expr()) : json(nullptr));
  s["lr_lambdas"] = l;
  return s;
}

// ---------------------------------------------------------------- StepLR

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma) : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
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
  for (double b : base_lrs_) r.push_back(b * std::pow(gamma_, static_cast<double>(floordiv(last_epoch_, step_size_))));
  return r;
}

json StepLR::state_dict() const {
  json s = LRScheduler::state_dict();
  s["step_size"] = step_size_;
  s["gamma"] = gamma_;
  return s;
}

void StepLR::load_state_dict(const json& s) {
  LRScheduler::load_state_dict(s);
  step_size_ = field<int64_t>(s, "step_size", type_name());
  gamma_ = field<double>(s, "gamma", type_name());
  TR_CHECK(step_size_ > 0, "StepLR.load_state_dict: step_size must be positive, got ", step_size_);
}

// ---------------------------------------------------------------- MultiStepLR

MultiStepLR::MultiStepLR(Optimizer& opt, const std::vector<int64_t>& milestones, double gamma)
    : LRScheduler(opt), gamma_(gamma) {
  for (int64_t m : milestones) ++milestones_[m];  // collections.Counter(milestones)
  initial_step();
}

std::vector<double> MultiStepLR::get_lr() {
  auto it = milestones_.find(last_epoch_);
  if (it == milestones_.end()) return group_lrs();
  std::vector<double> r;
  for (size_t i = 0; i < num_groups(); ++i) r.push_back(group_lr(i) * std::pow(gamma_, static_cast<double>(it->second)));
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
  s["gamma"] = gamma_;
  return s;
}

void MultiStepLR::load_state_dict(const json& s) {
  LRScheduler::load_state_dict(s);
  auto m = field<std::map<std::string, int64_t>>(s, "milestones", type_name());
  gamma_ = field<double>(s, "gamma", type_name());
  milestones_.clear();
  for (auto& [k, c] : m) {
    try {
      milestones_[std::stoll(k)] = c;
    } catch (const std::exception&) {
      throw Error(str("MultiStepLR.load_state_dict: milestone '", k, "' is not an integer"));
    }
  }
}

// ---------------------------------------------------------------- ConstantLR

ConstantLR::ConstantLR(Optimizer& opt, double factor, int64_t total_iters)
    : LRScheduler(opt), factor_(factor), total_iters_(total_iters) {
  TR_CHECK(factor >= 0 && factor <= 1.0, "ConstantLR: constant multiplicative factor expected to be between 0 and 1, got ",
           factor);
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

json ConstantLR::state_dict() const {
  json s = LRScheduler::state_dict();
  s["factor"] = factor_;
  s["total_iters"] = total_iters_;
  return s;
}

void ConstantLR::load_state_dict(const json& s) {
  LRScheduler::load_state_dict(s);
  factor_ = field<double>(s, "factor", type_name());
  total_iters_ = field<int64_t>(s, "total_iters", type_name());
}

// ---------------------------------------------------------------- LinearLR

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

json LinearLR::state_dict() const {
  json s = LRScheduler::state_dict();
  s["start_factor"] = start_factor_;
  s["end_factor"] = end_factor_;
  s["total_iters"] = total_iters_;
  return s;
}

void LinearLR::load_state_dict(const json& s) {
  LRScheduler::load_state_dict(s);
  start_factor_ = field<double>(s, "start_factor", type_name());
  end_factor_ = field<double>(s, "end_factor", type_name());
  total_iters_ = field<int64_t>(s, "total_iters", type_name());
}

// ---------------------------------------------------------------- ExponentialLR

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

json ExponentialLR::state_dict() const {
  json s = LRScheduler::state_dict();
  s["gamma"] = gamma_;
  return s;
}

void ExponentialLR::load_state_dict(const json& s) {
  LRScheduler::load_state_dict(s);
  gamma_ = field<double>(s, "gamma", type_name());
}

// ---------------------------------------------------------------- CosineAnnealingLR

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
      r[i] = eta_min_ + (base_lrs_[i] - eta_min_) * (1 + std::cos(e * kPi / T)) / 2;
  } else if ((last_epoch_ - 1 - T_max_) % (2 * T_max_) == 0) {
    // just past a minimum: the ratio below would be 0/0
    for (size_t i = 0; i < r.size(); ++i) r[i] = r[i] + (base_lrs_[i] - eta_min_) * (1 - std::cos(kPi / T)) / 2;
  } else {
    // lr_e - eta_min = (lr_{e-1} - eta_min) * (1 + cos(pi e / T)) / (1 + cos(pi (e-1) / T))
    for (double& v : r)
      v = (1 + std::cos(kPi * e / T)) / (1 + std::cos(kPi * (e - 1) / T)) * (v - eta_min_) + eta_min_;
  }
  return r;
}

std::optional<std::vector<double>> CosineAnnealingLR::closed_form_lr() const {
  const double e = static_cast<double>(last_epoch_), T = static_cast<double>(T_max_);
  std::vector<double> r;
  for (double b : base_lrs_) r.push_back(eta_min_ + (b - eta_min_) * (1 + std::cos(kPi * e / T)) / 2);
  return r;
}

json CosineAnnealingLR::state_dict() const {
  json s = LRScheduler::state_dict();
  s["T_max"] = T_max_;
  s["eta_min"] = eta_min_;
  return s;
}

void CosineAnnealingLR::load_state_dict(const json& s) {
  LRScheduler::load_state_dict(s);
  T_max_ = field<int64_t>(s, "T_max", type_name());
  eta_min_ = field<double>(s, "eta_min", type_name());
  TR_CHECK(T_max_ > 0, "CosineAnnealingLR.load_state_dict: T_max must be positive, got ", T_max_);
}

// ---------------------------------------------------------------- OneCycleLR

OneCycleLR::OneCycleLR(Optimizer& opt, OneCycleOptions o)
    : LRScheduler(opt), total_steps_(o.total_steps), anneal_strategy_(o.anneal_strategy), cycle_momentum_(o.cycle_momentum) {
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
    double cos_out = std::cos(kPi * pct) + 1;
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
        TR_CHECK(ph.end_step != start_step, "OneCycleLR: phase ", i, " has zero length (pct_start * total_steps = ",
                 ph.end_step + 1, "); raise pct_start or total_steps");
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
  total_steps_ = field<int64_t>(s, "total_steps", who);
  anneal_strategy_ = field<std::string>(s, "anneal_strategy", who);
  TR_CHECK(anneal_strategy_ == "cos" || anneal_strategy_ == "linear", who, ".load_state_dict: anneal_strategy '",
           anneal_strategy_, "'");
  cycle_momentum_ = field<bool>(s, "cycle_momentum", who);
  const bool use_beta1 = field<bool>(s, "use_beta1", who);
  momentum_key_ = cycle_momentum_ ? momentum_key_of(*opt_) : "";
  TR_CHECK(!cycle_momentum_ || use_beta1 == (momentum_key_ == "beta1"), who, ".load_state_dict: the state cycles ",
           use_beta1 ? "beta1" : "momentum", ", this optimizer's momentum is '", momentum_key_, "'");
  std::vector<Phase> phases;
  for (const json& p : field<json>(s, "_schedule_phases", who))
    phases.push_back({field<double>(p, "end_step", who), field<std::string>(p, "start_lr", who),
                      field<std::string>(p, "end_lr", who), field<std::string>(p, "start_momentum", who),
                      field<std::string>(p, "end_momentum", who)});
  TR_CHECK(!phases.empty(), who, ".load_state_dict: _schedule_phases is empty");
  phases_ = std::move(phases);
}

// ---------------------------------------------------------------- SequentialLR

SequentialLR::SequentialLR(Optimizer& opt, std::vector<std::unique_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(opt), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  TR_CHECK(!schedulers_.empty(), "SequentialLR: expects at least one scheduler");
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    TR_CHECK(schedulers_[i], "SequentialLR: scheduler ", i, " is null");
    TR_CHECK(&schedulers_[i]->optimizer() == &opt, "SequentialLR: expects all schedulers to belong to the same "
             "optimizer, but got scheduler at index ", i, " to be different than the optimizer passed in");
    // torch would call step(0) on it (a TypeError) or _initial_step() (which it does not expect)
    TR_CHECK(!dynamic_cast<SequentialLR*>(schedulers_[i].get()), "SequentialLR: scheduler ", i,
             " is a SequentialLR; nesting is not supported");
  }
  TR_CHECK(milestones_.size() == schedulers_.size() - 1, "SequentialLR: expects number of schedulers provided to be "
           "one more than the number of milestone points, but got number of schedulers ", schedulers_.size(),
           " and the number of milestones to be equal to ", milestones_.size());
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
  return json{{"_schedulers", children}, {"_milestones", milestones_}, {"last_epoch", last_epoch_}, {"_last_lr", last_lr_}};
}

void SequentialLR::load_state_dict(const json& s) {
  const std::string who = type_name();
  auto children = field<json>(s, "_schedulers", who);
  TR_CHECK(children.is_array() && children.size() == schedulers_.size(), who, ".load_state_dict: the state has ",
           children.size(), " schedulers, this SequentialLR ", schedulers_.size());
  auto milestones = field<std::vector<int64_t>>(s, "_milestones", who);
  TR_CHECK(milestones.size() == milestones_.size(), who, ".load_state_dict: ", milestones.size(),
           " milestones, expected ", milestones_.size());
  auto last = field<std::vector<double>>(s, "_last_lr", who);
  TR_CHECK(last.size() == num_groups(), who, ".load_state_dict: the state has ", last.size(), " param groups, the optimizer ",
           num_groups());
  last_epoch_ = field<int64_t>(s, "last_epoch", who);
  milestones_ = std::move(milestones);
  last_lr_ = std::move(last);
  for (size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_state_dict(children[i]);
}

}  // namespace tr::optim
