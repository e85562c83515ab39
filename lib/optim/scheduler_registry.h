// The scheduler registry behind [scheduler] type = "...": Registry<SchedulerType>. Each
// scheduler registers itself from its own file in optim/schedulers/ with a builder that reads its
// keys (torch's argument names) from the table:
//
//   [scheduler]
//   type = "cosine"             # `trainer list schedulers` prints every type with its keys
//   interval = "epoch" | "step" # what one scheduler.step() is; the type's default_interval if absent
//   T_max = 10                  # the type's own keys
//
// Unknown keys and types are errors with file:line:col and the nearest valid name.
#pragma once
#include <toml++/toml.h>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "core/registry.h"
#include "optim/lr_scheduler.h"
#include "toml/toml_table.h"

namespace tr::optim {

// The run's lengths, for defaults such as cosine's T_max.
struct SchedulerContext {
  int64_t total_steps = 0;      // optimizer steps in the whole run (0: unknown)
  int64_t steps_per_epoch = 0;  // optimizer steps per epoch (0: unknown)
  int64_t epochs = 0;           // epochs in the run (0: unknown)
  int64_t warmup_steps = 0;     // default of the lambda variable warmup_steps
  std::string file;             // the config file, for error locations
};

// What a scheduler's builder gets besides its table.
struct SchedulerBuild {
  Optimizer& opt;
  const SchedulerContext& run;
  std::string interval;  // "epoch" | "step"
  int64_t span = 0;      // scheduler steps this scheduler covers (the run, or a sequential phase); 0: unknown
};

using SchedulerBuilder = std::function<std::unique_ptr<LRScheduler>(const TomlTable& t, const SchedulerBuild& b)>;

// A scheduler a run config can name.
struct SchedulerType {
  SchedulerBuilder build;
  std::string doc;  // one line: the keys it takes
  std::string default_interval = "epoch";

  static constexpr const char* kRegistryKind = "scheduler";
};

#define TR_REGISTER_SCHEDULER(NAME, ...)                                                                             \
  static const ::tr::Registrar<::tr::optim::SchedulerType> TR_REGISTRY_CONCAT(tr_scheduler_registrar_, __COUNTER__)( \
      NAME, __VA_ARGS__)

// The scheduler of a [scheduler] table, its interval() set: the training loop calls step() after
// every optimizer step ("step") or at the end of every epoch ("epoch").
std::unique_ptr<LRScheduler> make_scheduler(const TomlTable& t, Optimizer& opt, const SchedulerContext& ctx);
std::unique_ptr<LRScheduler> make_scheduler(const toml::table& t, Optimizer& opt, const SchedulerContext& ctx);
// The scheduler t["type"] names, built by its registration, with t's keys all read (finish()):
// how SequentialLR builds its children.
std::unique_ptr<LRScheduler> build_scheduler(const TomlTable& t, const SchedulerBuild& b);

// ---- for builders ----

// Runs a scheduler's constructor; its errors get the table's location.
template <typename F> auto located(const TomlTable& t, F&& make) {
  try {
    return make();
  } catch (const Error& e) { throw Error(str(t.location(), ": ", t.what(), ": ", e.what())); }
}
// A positive integer key whose default is the span; without a span the key is required.
int64_t int_or_span(const TomlTable& t, const std::string& key, int64_t span);
// A number, or a list of numbers (one per param group).
std::vector<double> float_or_list(const TomlTable& t, const std::string& key, std::vector<double> dflt);

}  // namespace tr::optim
