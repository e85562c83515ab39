#include "optim/scheduler_config.h"
#include <algorithm>

namespace tr::optim {

namespace {

// Errors from a scheduler's constructor get the table's location.
template <typename F>
auto located(const TomlTable& t, F&& make) {
  try {
    return make();
  } catch (const Error& e) {
    throw Error(str(t.location(), ": ", t.what(), ": ", e.what()));
  }
}

// A key whose default is the span (the scheduler steps this scheduler covers), if known.
int64_t int_or_span(const TomlTable& t, const std::string& key, int64_t span) {
  if (t.has(key)) {
    int64_t v = t.get_int(key);
    if (v <= 0) t.fail(key, str("must be positive, got ", v));
    return v;
  }
  if (span <= 0) t.fail(key, "is required here: the length of the run (or of this phase) is unknown, so it has no default");
  return span;
}

// A number, or a list of numbers (one per param group).
std::vector<double> float_or_list(const TomlTable& t, const std::string& key, std::vector<double> dflt) {
  const toml::node* n = t.node(key);
  if (!n) return dflt;
  if (n->is_array()) return t.get_floats(key);
  return {t.get_float(key)};
}

std::unique_ptr<LRScheduler> build(const TomlTable& t, Optimizer& opt, const SchedulerContext& ctx,
                                   const std::string& interval, int64_t span) {
  t.get_string("type");  // required
  const std::string type = t.get_choice("type", scheduler_types(), "");
  std::unique_ptr<LRScheduler> s;

  if (type == "lambda") {
    std::vector<std::string> exprs = t.get_strings("lambda");
    const size_t groups = opt.param_groups().size();
    if (exprs.size() != 1 && exprs.size() != groups)
      t.fail("lambda", str("has ", exprs.size(), " expressions; expected one, or one per param group (", groups, ")"));
    // Parse each here so that an error points at its own string in the file.
    const toml::node* n = t.node("lambda");
    for (size_t i = 0; i < exprs.size(); ++i) {
      const toml::node* e = n->is_array() ? n->as_array()->get(i) : n;
      std::string what = exprs.size() == 1 ? str(toml_location(*e, t.file()), ": ", t.what(), ": lambda")
                                           : str(toml_location(*e, t.file()), ": ", t.what(), ": lambda for param group ",
                                                 i, " ('", opt.param_groups()[i].name, "')");
      LambdaExpr check(exprs[i], what);
    }
    LambdaContext lc;
    lc.interval = interval;
    lc.steps_per_epoch = std::max<int64_t>(1, ctx.steps_per_epoch);
    lc.total_steps = ctx.total_steps;
    lc.total_epochs = ctx.epochs;
    lc.warmup_steps = t.get_int("warmup_steps", ctx.warmup_steps);
    s = located(t, [&] { return std::make_unique<LambdaLR>(opt, exprs, lc); });
  } else if (type == "step") {
    int64_t step_size = t.get_int("step_size");
    double gamma = t.get_float("gamma", 0.1);
    s = located(t, [&] { return std::make_unique<StepLR>(opt, step_size, gamma); });
  } else if (type == "multistep") {
    std::vector<int64_t> milestones = t.get_ints("milestones");
    double gamma = t.get_float("gamma", 0.1);
    s = located(t, [&] { return std::make_unique<MultiStepLR>(opt, milestones, gamma); });
  } else if (type == "exponential") {
    double gamma = t.get_float("gamma");
    s = located(t, [&] { return std::make_unique<ExponentialLR>(opt, gamma); });
  } else if (type == "cosine") {
    int64_t T_max = int_or_span(t, "T_max", span);
    double eta_min = t.get_float("eta_min", 0.0);
    s = located(t, [&] { return std::make_unique<CosineAnnealingLR>(opt, T_max, eta_min); });
  } else if (type == "linear") {
    double start = t.get_float("start_factor", 1.0 / 3), end = t.get_float("end_factor", 1.0);
    int64_t total_iters = t.get_int("total_iters", 5);
    s = located(t, [&] { return std::make_unique<LinearLR>(opt, start, end, total_iters); });
  } else if (type == "constant") {
    double factor = t.get_float("factor", 1.0 / 3);
    int64_t total_iters = t.get_int("total_iters", 5);
    s = located(t, [&] { return std::make_unique<ConstantLR>(opt, factor, total_iters); });
  } else if (type == "onecycle") {
    OneCycleOptions o;
    if (!t.has("max_lr")) t.get_float("max_lr");  // the "missing required key" error
    o.max_lr = float_or_list(t, "max_lr", {});
    o.total_steps = int_or_span(t, "total_steps", span);
    o.pct_start = t.get_float("pct_start", o.pct_start);
    o.anneal_strategy = t.get_choice("anneal_strategy", {"cos", "linear"}, o.anneal_strategy);
    o.cycle_momentum = t.get_bool("cycle_momentum", o.cycle_momentum);
    o.base_momentum = float_or_list(t, "base_momentum", o.base_momentum);
    o.max_momentum = float_or_list(t, "max_momentum", o.max_momentum);
    o.div_factor = t.get_float("div_factor", o.div_factor);
    o.final_div_factor = t.get_float("final_div_factor", o.final_div_factor);
    o.three_phase = t.get_bool("three_phase", o.three_phase);
    s = located(t, [&] { return std::make_unique<OneCycleLR>(opt, o); });
  } else if (type == "sequential") {
    std::vector<TomlTable> children = t.get_tables("schedulers");
    std::vector<int64_t> milestones = t.get_ints("milestones");
    if (children.empty()) t.fail("schedulers", "is empty");
    if (milestones.size() + 1 != children.size())
      t.fail("milestones", str("has ", milestones.size(), " entries; expected one fewer than schedulers (",
                               children.size() - 1, ")"));
    std::vector<std::unique_ptr<LRScheduler>> built;
    for (size_t i = 0; i < children.size(); ++i) {
      const TomlTable& c = children[i];
      if (c.has("interval")) c.fail("interval", "is set on the sequential scheduler, not on its children");
      // The phase of child i: [milestones[i-1], milestones[i]); the last one runs to the end.
      int64_t begin = i == 0 ? 0 : milestones[i - 1];
      int64_t child_span = i + 1 < children.size() ? milestones[i] - begin : (span > begin ? span - begin : 0);
      built.push_back(build(c, opt, ctx, interval, child_span));
    }
    s = located(t, [&] { return std::make_unique<SequentialLR>(opt, std::move(built), milestones); });
  }
  t.finish();
  return s;
}

}  // namespace

const std::vector<std::string>& scheduler_types() {
  static const std::vector<std::string> v = {"lambda", "step",     "multistep", "exponential", "cosine",
                                             "linear", "constant", "onecycle",  "sequential"};
  return v;
}

std::unique_ptr<LRScheduler> make_scheduler(const TomlTable& t, Optimizer& opt, const SchedulerContext& ctx) {
  std::string type = t.has("type") ? t.get_string("type") : "";
  const std::string interval = t.get_choice("interval", {"epoch", "step"}, type == "onecycle" ? "step" : "epoch");
  const int64_t span = interval == "step" ? ctx.total_steps : ctx.epochs;
  std::unique_ptr<LRScheduler> s = build(t, opt, ctx, interval, span);
  s->set_interval(interval);
  return s;
}

std::unique_ptr<LRScheduler> make_scheduler(const toml::table& t, Optimizer& opt, const SchedulerContext& ctx) {
  return make_scheduler(TomlTable(t, ctx.file, "[scheduler]"), opt, ctx);
}

}  // namespace tr::optim
