#include "train/plan.h"
#include <algorithm>
#include <cmath>
#include "core/allocator.h"
#include "core/format_bytes.h"
#include "core/grad_mode.h"
#include "ops/autocast.h"
#include "ops/flop_counter.h"
#include "ops/ops.h"
#include "train/progress.h"
#include "train/run_setup.h"

namespace tr::train {

namespace {

// the plan's memory figures, all in MiB so that its rows compare
std::string mib(double bytes) { return format_bytes(bytes, 1, "MiB"); }

std::string thousands(int64_t v) {
  std::string s = std::to_string(v), r;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) r += ',';
    r += s[i];
  }
  return r;
}

double bytes_of(const std::vector<Tensor>& ts) {
  double b = 0;
  for (const Tensor& t : ts) b += double(t.numel()) * double(t.element_size());
  return b;
}

// The first `n` samples of a batch (repeated where the batch has fewer).
Tensor first(const Tensor& t, int64_t n) {
  if (t.size(0) >= n) return t.narrow(0, 0, n);
  std::vector<Tensor> parts;
  for (int64_t have = 0; have < n; have += t.size(0)) parts.push_back(t);
  return cat(parts, 0).narrow(0, 0, n);
}

// 64 columns, 8 levels: the curve of `v` sampled evenly
std::string sparkline(const std::vector<double>& v) {
  static const char* kLevels[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  if (v.empty()) return "";
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  const size_t cols = std::min<size_t>(64, v.size());
  std::string s;
  for (size_t c = 0; c < cols; ++c) {
    const double x = v[c * (v.size() - 1) / std::max<size_t>(cols - 1, 1)];
    const int level = *hi > *lo ? int(std::lround((x - *lo) / (*hi - *lo) * 7)) : 3;
    s += kLevels[std::clamp(level, 0, 7)];
  }
  return s;
}

// The optimizer's param groups into m.groups; returns the bytes of optimizer state they will hold.
double measure_groups(Run& r, PlanMeasurement& m) {
  double opt_state = 0;
  for (const auto& g : r.optimizer->param_groups()) {
    ParamGroupPlan gp;
    gp.name = g.name;
    gp.tensors = g.params.size();
    for (const Tensor& w : g.params) gp.params += w.numel();
    optim::Options o = r.optimizer->defaults();
    for (const auto& [k, v] : g.options) o[k] = v;
    for (const char* k : {"lr", "weight_decay", "momentum"})
      if (o.count(k)) gp.hyperparameters.emplace_back(k, o[k]);
    int per_param = 0;
    for (const std::string& k : r.optimizer->state_keys(o)) per_param += k != "step";
    opt_state += bytes_of(g.params) * per_param;
    m.groups.push_back(std::move(gp));
  }
  return opt_state;
}

// One forward (and backward when `train`) of the batch's first n samples: its peak memory and FLOPs.
struct PassCost {
  double peak = 0, flops = 0;
};
PassCost measure_pass(Run& r, const data::Batch& batch, int64_t n, bool train) {
  r.optimizer->zero_grad();
  allocator_for(r.device).empty_cache();
  reset_peak_memory_stats(r.device);
  FlopCounter counter;
  {
    Tensor x = r.to_run(first(batch.input, n)), y = r.to_run(first(batch.target, n));
    amp::AutocastGuard autocast(r.device.type, r.amp_dtype(), r.cfg.amp.enabled);
    if (train) {
      r.model.net->train();
      Tensor loss = r.loss((*r.model.net)(x), y).first;
      loss.backward();
    } else {
      NoGradGuard ng;
      r.model.net->eval();
      (*r.model.net)(x);
    }
  }
  PassCost cost{double(max_memory_allocated(r.device)), counter.flops()};
  r.optimizer->zero_grad();
  return cost;
}

// Memory and FLOPs are linear in the batch: measured at two batch sizes, b and 2b with b an eighth
// of the micro-batch (large enough that the kernels take the paths and workspaces of the real
// batch, small enough to plan quickly), and extrapolated to the real one.
void measure_memory_and_flops(Run& r, double optimizer_state, PlanMeasurement& m) {
  r.loader->begin_epoch(0);
  const std::optional<data::Batch> batch = r.loader->next();
  TR_CHECK(batch && batch->input.defined(), "trainer plan: the training set gives no batch");
  const int64_t micro = m.micro_batch, b1 = std::max<int64_t>(1, micro / 8), b2 = 2 * b1;
  const PassCost t1 = measure_pass(r, *batch, b1, true), t2 = measure_pass(r, *batch, b2, true);
  MemoryPlan& mem = m.memory;
  mem.params = bytes_of(r.model.net->parameters());
  for (const Tensor& w : r.optimizer->params()) mem.grads += double(w.numel()) * double(w.element_size());
  mem.optimizer_state = optimizer_state;
  mem.per_sample = std::max(0.0, t2.peak - t1.peak) / double(b1);
  mem.fixed = t1.peak - mem.per_sample * double(b1);
  mem.activations = mem.per_sample * double(micro);
  mem.step_peak = mem.fixed + mem.activations + mem.optimizer_state;
  const int64_t v1 = std::max<int64_t>(1, m.eval_batch / 8), v2 = 2 * v1;
  const double e1 = measure_pass(r, *batch, v1, false).peak, e2 = measure_pass(r, *batch, v2, false).peak;
  const double eval_per_sample = std::max(0.0, e2 - e1) / double(v1);
  mem.eval_peak = e1 + eval_per_sample * double(m.eval_batch - v1) + mem.optimizer_state;
  const double flops_per_sample = (t2.flops - t1.flops) / double(b1);
  m.flops_per_step = (t1.flops + flops_per_sample * double(micro - b1)) * double(m.accumulate);
}

// [dist] shard (distributed/ddp.h). The step measured holds every gradient once, as backward
// makes them; DDP adds its buckets (a second copy), ZeRO-1 too but keeps 1/nproc of the optimizer
// state; ZeRO-2 frees each gradient once it is in its bucket and keeps 1/nproc of the reduced ones,
// the full ones living one bucket at a time.
std::vector<ShardMemoryPlan> shard_memory(const MemoryPlan& m, double bucket_bytes, int nproc) {
  const double bucket = std::min(m.grads, bucket_bytes);
  const double base = m.step_peak - m.optimizer_state - m.grads;  // without gradients and state
  const double g2 = m.grads / nproc + bucket;
  return {{"none", 2 * m.grads, m.optimizer_state, base + 2 * m.grads + m.optimizer_state},
          {"optimizer", 2 * m.grads, m.optimizer_state / nproc, base + 2 * m.grads + m.optimizer_state / nproc},
          {"gradients", g2, m.optimizer_state / nproc, base + g2 + m.optimizer_state / nproc}};
}

// Every group's lr at every step, the scheduler stepped as the trainer steps it.
void measure_lr_schedule(Run& r, PlanMeasurement& m) {
  for (int64_t s = 0; s < r.total_steps; ++s) {
    const std::vector<double> now = r.optimizer->lrs();
    for (size_t g = 0; g < m.groups.size(); ++g) m.groups[g].lrs.push_back(now[g]);
    if (r.scheduler) {
      r.scheduler->optimizer_stepped();
      if (r.scheduler->interval() == "step")
        r.scheduler->step();
      else if ((s + 1) % r.steps_per_epoch == 0)
        r.scheduler->step();
    }
  }
  m.schedule = r.scheduler
                   ? str((*r.cfg.scheduler.table)["type"].value_or(std::string("?")), ", per ", r.scheduler->interval())
                   : std::string("constant");
}

// ---- rendering ----

void render_model(const PlanMeasurement& m, std::string& t) {
  t += str("plan for ", m.config_path, ": ", m.device, ", ", m.nproc, " rank(s)\n");
  t += str("model: ", thousands(m.params), " parameters (", mib(m.memory.params), ")\n");
  t += "param groups (the optimizer's; frozen ones are not in it):\n";
  for (const ParamGroupPlan& g : m.groups) {
    std::string hp;
    for (const auto& [k, v] : g.hyperparameters) hp += str("  ", k, " ", json_num(v));
    t += str("  ", g.name, ": ", g.tensors, " tensors, ", thousands(g.params), " parameters", hp, "\n");
  }
  if (m.frozen_params > 0)
    t += str("  frozen: ", thousands(m.frozen_params), " parameters (no gradient, no optimizer state)\n");
  t += str("data: ", m.train_samples, " training samples, batch ", m.batch_size, " (", m.micro_batch, " per rank",
           m.accumulate > 1 ? str(", ", m.accumulate, " micro-batches a step") : "", "): ", m.steps_per_epoch,
           " steps per epoch x ", m.epochs, " epoch(s) = ", m.total_steps, " steps\n");
}

void render_cost(const PlanMeasurement& p, std::string& t) {
  const MemoryPlan& m = p.memory;
  t += str("FLOPs per step per rank: ", json_num(std::round(p.flops_per_step / 1e6) / 1e3),
           " GFLOP (matrix products and convolutions, forward and backward)\n");
  t += str("memory per rank (estimate; what train lines report as mem_peak_mb):\n");
  t += str("  parameters ", mib(m.params), ", gradients ", mib(m.grads), ", optimizer state ", mib(m.optimizer_state),
           " (", p.optimizer_type, ")\n");
  t += str("  activations ", mib(m.activations), " (", mib(m.per_sample), " per sample x ", p.micro_batch, ")\n");
  t += str("  a training step's peak ~ ", mib(m.step_peak), "; an eval batch of ", p.eval_batch, " ~ ",
           mib(m.eval_peak), "\n");
  if (p.shards.empty()) return;
  t += str("memory per rank by [dist] shard (", p.nproc, " ranks; this config: \"", p.shard, "\"):\n");
  for (const ShardMemoryPlan& sp : p.shards)
    t += str("  ", sp.shard, std::string(10 - sp.shard.size(), ' '), "gradient memory ", mib(sp.grads),
             ", optimizer state ", mib(sp.optimizer_state), ", a training step's peak ~ ", mib(sp.step_peak), "\n");
}

// The schedule's lines and its chart.
io::Chart render_lr_schedule(const PlanMeasurement& m, std::string& t) {
  io::Chart chart{"learning rate (planned)", "step", "lr", {}, false};
  t += str("lr schedule (", m.schedule, "):\n");
  for (size_t g = 0; g < m.groups.size(); ++g) {
    const std::vector<double>& v = m.groups[g].lrs;
    if (v.empty()) continue;
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    t += str("  ", m.groups[g].name, ": ", json_num(v.front()), " -> ", json_num(v.back()), " (min ", json_num(*lo),
             ", max ", json_num(*hi), ")  ", sparkline(v), "\n");
    io::Series se{m.groups[g].name, {}, v, g > 0, int(g)};
    for (size_t s = 0; s < v.size(); ++s) se.x.push_back(double(s + 1));
    chart.series.push_back(std::move(se));
  }
  return chart;
}

// Settings that are probably mistakes.
std::vector<std::string> plan_warnings(const PlanMeasurement& m) {
  std::vector<std::string> w;
  for (const ParamGroupPlan& g : m.groups)
    if (g.tensors == 0) w.push_back(str("param group '", g.name, "' is empty"));
  for (const ParamGroupPlan& g : m.groups) {
    const std::vector<double>& v = g.lrs;
    if (v.empty()) continue;
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    if (*hi == 0)
      w.push_back(str("param group '", g.name, "' has lr 0 for the whole run: its parameters never ",
                      "change (frozen = true says so, and saves its gradients and state)"));
    else if (v.size() > 1 && v.back() > v.front() && std::is_sorted(v.begin(), v.end()))
      w.push_back(str("the lr of param group '", g.name, "' rises over the whole run (", json_num(v.front()), " -> ",
                      json_num(v.back()), "): is the warmup longer than the run's ", m.total_steps, " steps?"));
  }
  return w;
}

}  // namespace

PlanMeasurement measure_plan(config::RunConfig cfg_in, int nproc) {
  cfg_in.log.progress = "none";
  Run r(std::move(cfg_in), nproc);
  const config::RunConfig& c = r.cfg;
  TR_CHECK(nproc >= 1 && c.data.batch_size % nproc == 0, "trainer plan: [data] batch_size = ", c.data.batch_size,
           " is the global batch and must be divisible by the ", nproc, " ranks planned");
  PlanMeasurement m;
  m.config_path = c.path;
  m.device = r.device.str();
  m.optimizer_type = r.optimizer->type_name();
  m.nproc = nproc;
  for (const Tensor& w : r.model.net->parameters()) {
    m.params += w.numel();
    m.frozen_params += w.requires_grad() ? 0 : w.numel();
  }
  const double optimizer_state = measure_groups(r, m);
  m.train_samples = r.data.train->size();
  m.batch_size = c.data.batch_size;
  m.accumulate = c.train.accumulate;
  m.micro_batch = c.data.batch_size / nproc;
  m.eval_batch = (c.data.eval_batch_size > 0 ? c.data.eval_batch_size : c.data.batch_size) / nproc;
  m.steps_per_epoch = r.steps_per_epoch;
  m.epochs = r.epochs();
  m.total_steps = r.total_steps;
  measure_memory_and_flops(r, optimizer_state, m);
  m.shard = c.dist.shard;
  if (nproc > 1) m.shards = shard_memory(m.memory, c.dist.bucket_mb * 1024 * 1024, nproc);
  measure_lr_schedule(r, m);
  return m;
}

Plan render_plan(const PlanMeasurement& m) {
  Plan p;
  p.memory = m.memory;
  p.shards = m.shards;
  p.flops_per_step = m.flops_per_step;
  render_model(m, p.text);
  render_cost(m, p.text);
  p.charts.push_back(render_lr_schedule(m, p.text));
  p.warnings = plan_warnings(m);
  for (const std::string& w : p.warnings) p.text += "warning: " + w + "\n";
  return p;
}

Plan make_plan(config::RunConfig cfg, int nproc) { return render_plan(measure_plan(std::move(cfg), nproc)); }

}  // namespace tr::train
