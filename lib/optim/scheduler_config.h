// Builds an LR scheduler from the run config's [scheduler] table.
//
//   [scheduler]
//   type = "lambda" | "step" | "multistep" | "exponential" | "cosine" | "linear" | "constant"
//        | "onecycle" | "sequential"
//   interval = "epoch" | "step"   # what one scheduler.step() is; default "epoch" ("step" for onecycle)
//
// and torch's argument names per type (defaults as torch's unless noted):
//   lambda       lambda = "0.95^epoch" or one string per param group; warmup_steps (ctx's)
//                (variables and helpers: lambda_expr.h; their meaning: LambdaContext in lr_scheduler.h)
//   step         step_size (required), gamma = 0.1
//   multistep    milestones (required), gamma = 0.1
//   exponential  gamma (required)
//   cosine       T_max (default: the run's length in intervals), eta_min = 0
//   linear       start_factor = 1/3, end_factor = 1, total_iters = 5
//   constant     factor = 1/3, total_iters = 5
//   onecycle     max_lr (required; a number or one per group), total_steps (default: the run's length
//                in intervals), pct_start = 0.3, anneal_strategy = "cos" | "linear", cycle_momentum = true,
//                base_momentum = 0.85, max_momentum = 0.95 (numbers or one per group), div_factor = 25,
//                final_div_factor = 1e4, three_phase = false
//   sequential   schedulers = [{type = ...}, ...] (no interval of their own), milestones (one fewer)
//                a child's T_max / total_steps default to the length of its phase
// Unknown keys are errors with file:line:col and the nearest valid key.
#pragma once
#include <toml++/toml.h>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "optim/lr_scheduler.h"
#include "toml/toml_table.h"

namespace tr::optim {

struct SchedulerContext {
  int64_t total_steps = 0;      // optimizer steps in the whole run (0: unknown)
  int64_t steps_per_epoch = 0;  // optimizer steps per epoch (0: unknown)
  int64_t epochs = 0;           // epochs in the run (0: unknown)
  int64_t warmup_steps = 0;     // default of the lambda variable warmup_steps
  std::string file;             // the config file, for error locations
};

// The scheduler's interval() tells the training loop when to call step(): after every optimizer
// step ("step") or at the end of every epoch ("epoch").
std::unique_ptr<LRScheduler> make_scheduler(const toml::table& t, Optimizer& opt, const SchedulerContext& ctx);
std::unique_ptr<LRScheduler> make_scheduler(const TomlTable& t, Optimizer& opt, const SchedulerContext& ctx);

const std::vector<std::string>& scheduler_types();

}  // namespace tr::optim
