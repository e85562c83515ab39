// `trainer plan cfg.toml`: what a run will do, before it trains: parameters per group, steps,
// FLOPs per step, memory per rank (parameters, gradients, optimizer state, activations), the LR
// schedule of every group, and warnings for settings that are probably mistakes.
#pragma once
#include <string>
#include <utility>
#include <vector>
#include "config/run_config.h"
#include "io/svg_chart.h"

namespace tr::train {

struct MemoryPlan {
  double params = 0, grads = 0, optimizer_state = 0;  // bytes per rank
  double fixed = 0, per_sample = 0;  // a forward + backward's peak = fixed + per_sample x micro-batch (fitted at b, 2b)
  double activations = 0;            // per_sample x the micro-batch per rank
  double step_peak = 0;              // the estimate of a training step's peak: fixed + activations + optimizer state
  double eval_peak = 0;              // an eval batch's forward: its fixed + per-sample x eval batch per rank
};

// A training step's memory per rank under one [dist] shard setting (plans of several ranks).
struct ShardMemoryPlan {
  std::string shard;                                     // "none" | "optimizer" | "gradients"
  double grads = 0, optimizer_state = 0, step_peak = 0;  // bytes per rank
};

// One param group of the optimizer, as planned.
struct ParamGroupPlan {
  std::string name;
  size_t tensors = 0;
  int64_t params = 0;
  std::vector<std::pair<std::string, double>> hyperparameters;  // lr, weight_decay, momentum: those it has
  std::vector<double> lrs;  // the lr of every step of the run, the schedule stepped as the trainer steps it
};

// What make_plan measures, before any of it is put in words.
struct PlanMeasurement {
  std::string config_path, device, optimizer_type;
  int nproc = 1;
  int64_t params = 0, frozen_params = 0;
  std::vector<ParamGroupPlan> groups;
  int64_t train_samples = 0, batch_size = 0, accumulate = 1;
  int64_t micro_batch = 0;  // samples per rank per micro-batch
  int64_t eval_batch = 0;   // samples per rank per eval batch
  int64_t steps_per_epoch = 0, epochs = 0, total_steps = 0;
  double flops_per_step = 0;  // per rank
  MemoryPlan memory;
  std::string shard;                    // this config's [dist] shard
  std::vector<ShardMemoryPlan> shards;  // with nproc > 1: each [dist] shard setting
  std::string schedule;                 // "<type>, per <interval>", or "constant"
};

struct Plan {
  std::string text;               // the terminal report
  std::vector<io::Chart> charts;  // the LR schedule (for --out)
  MemoryPlan memory;
  std::vector<ShardMemoryPlan> shards;  // with nproc > 1: each [dist] shard setting
  double flops_per_step = 0;            // per rank
  std::vector<std::string> warnings;
};

// Sets the run up (model, data, optimizer, scheduler; no process group: `nproc` ranks are planned,
// each with batch_size / nproc samples a micro-batch), measures a forward + backward at micro-
// batches of b and 2b samples (b an eighth of the real one) and extrapolates memory and FLOPs
// linearly to the real batch, and steps the LR schedule through the run. Trains nothing, writes nothing.
// make_plan is render_plan(measure_plan(...)).
Plan make_plan(config::RunConfig cfg, int nproc);
PlanMeasurement measure_plan(config::RunConfig cfg, int nproc);
// The report, the LR chart and the warnings of a measurement.
Plan render_plan(const PlanMeasurement& m);

}  // namespace tr::train
