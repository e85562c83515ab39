// make_scheduler: a [scheduler] table -> the registered scheduler it names, with its interval.
#include "optim/scheduler_registry.h"

namespace tr::optim {

int64_t int_or_span(const TomlTable& t, const std::string& key, int64_t span) {
  if (t.has(key)) {
    int64_t v = t.get_int(key);
    if (v <= 0) t.fail(key, str("must be positive, got ", v));
    return v;
  }
  if (span <= 0)
    t.fail(key, "is required here: the length of the run (or of this phase) is unknown, so it has no default");
  return span;
}

std::vector<double> float_or_list(const TomlTable& t, const std::string& key, std::vector<double> dflt) {
  const toml::node* n = t.node(key);
  if (!n) return dflt;
  if (n->is_array()) return t.get_floats(key);
  return {t.get_float(key)};
}

std::unique_ptr<LRScheduler> build_scheduler(const TomlTable& t, const SchedulerBuild& b) {
  std::unique_ptr<LRScheduler> s = t.get_registered<SchedulerType>("type").build(t, b);
  t.finish();
  return s;
}

std::unique_ptr<LRScheduler> make_scheduler(const TomlTable& t, Optimizer& opt, const SchedulerContext& ctx) {
  const SchedulerType& type = t.get_registered<SchedulerType>("type");
  const std::string interval = t.get_choice("interval", {"epoch", "step"}, type.default_interval);
  SchedulerBuild b{opt, ctx, interval, interval == "step" ? ctx.total_steps : ctx.epochs};
  std::unique_ptr<LRScheduler> s = build_scheduler(t, b);
  s->set_interval(interval);
  return s;
}

std::unique_ptr<LRScheduler> make_scheduler(const toml::table& t, Optimizer& opt, const SchedulerContext& ctx) {
  return make_scheduler(TomlTable(t, ctx.file, "[scheduler]"), opt, ctx);
}

}  // namespace tr::optim
