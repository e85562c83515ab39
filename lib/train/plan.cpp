#include "train/plan.h"
#include <algorithm>
#include <cmath>
#include "core/allocator.h"
#include "core/grad_mode.h"
#include "ops/autocast.h"
#include "ops/flop_counter.h"
#include "ops/ops.h"
#include "train/progress.h"
#include "train/run_setup.h"

namespace tr::train {

namespace {

std::string mib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", bytes / (1 << 20));
  return b;
}

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

}  // namespace

Plan make_plan(config::RunConfig cfg_in, int nproc) {
  cfg_in.log.progress = "none";
  Run r(std::move(cfg_in), nproc);
  const config::RunConfig& c = r.cfg;
  TR_CHECK(nproc >= 1 && c.data.batch_size % nproc == 0, "trainer plan: [data] batch_size = ", c.data.batch_size,
           " is the global batch and must be divisible by the ", nproc, " ranks planned");
  const int64_t micro = c.data.batch_size / nproc;  // samples per rank per micro-batch
  Plan p;
  std::string& t = p.text;
  t += str("plan for ", c.path, ": ", r.device.str(), ", ", nproc, " rank(s)\n");

  // ---- the model and its param groups ----
  int64_t n_params = 0;
  for (const Tensor& w : r.model.net->parameters()) n_params += w.numel();
  t += str("model: ", thousands(n_params), " parameters (", mib(bytes_of(r.model.net->parameters())), ")\n");
  t += "param groups (the optimizer's; frozen ones are not in it):\n";
  double opt_state = 0;
  std::vector<std::string> group_names;
  for (const auto& g : r.optimizer->param_groups()) {
    int64_t n = 0;
    for (const Tensor& w : g.params) n += w.numel();
    optim::Options o = r.optimizer->defaults();
    for (const auto& [k, v] : g.options) o[k] = v;
    std::string hp;
    for (const char* k : {"lr", "weight_decay", "momentum"})
      if (o.count(k)) hp += str("  ", k, " ", json_num(o[k]));
    t += str("  ", g.name, ": ", g.params.size(), " tensors, ", thousands(n), " parameters", hp, "\n");
    int per_param = 0;
    for (const std::string& k : r.optimizer->state_keys(o)) per_param += k != "step";
    opt_state += bytes_of(g.params) * per_param;
    group_names.push_back(g.name);
    if (g.params.empty()) p.warnings.push_back(str("param group '", g.name, "' is empty"));
  }
  int64_t frozen = 0;
  for (const Tensor& w : r.model.net->parameters()) frozen += w.requires_grad() ? 0 : w.numel();
  if (frozen > 0) t += str("  frozen: ", thousands(frozen), " parameters (no gradient, no optimizer state)\n");

  // ---- steps ----
  t += str("data: ", r.data.train->size(), " training samples, batch ", c.data.batch_size, " (", micro, " per rank",
           c.train.accumulate > 1 ? str(", ", c.train.accumulate, " micro-batches a step") : "", "): ",
           r.steps_per_epoch, " steps per epoch x ", r.epochs(), " epoch(s) = ", r.total_steps, " steps\n");

  // ---- one forward + backward at 1 and 2 samples: memory and FLOPs, linear in the batch ----
  r.loader->begin_epoch(0);
  const std::optional<data::Batch> batch = r.loader->next();
  TR_CHECK(batch && batch->input.defined(), "trainer plan: the training set gives no batch");
  auto fwd_bwd = [&](int64_t n, bool train, double* flops) {
    r.optimizer->zero_grad();
    allocator_for(r.device).empty_cache();
    reset_peak_memory_stats(r.device);
    FlopCounter counter;
    {
      Tensor x = r.to_run(first(batch->input, n)), y = r.to_run(first(batch->target, n));
      amp::AutocastGuard autocast(r.device.type, r.amp_dtype(), c.amp.enabled);
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
    if (flops) *flops = counter.flops();
    const double peak = double(max_memory_allocated(r.device));
    r.optimizer->zero_grad();
    return peak;
  };
  // two batch sizes, b and 2b with b an eighth of the micro-batch: large enough that the kernels
  // take the paths (and workspaces) of the real batch, small enough to plan quickly
  const int64_t b1 = std::max<int64_t>(1, micro / 8), b2 = 2 * b1;
  double f1 = 0, f2 = 0;
  const double m1 = fwd_bwd(b1, true, &f1), m2 = fwd_bwd(b2, true, &f2);
  MemoryPlan& m = p.memory;
  m.params = bytes_of(r.model.net->parameters());
  for (const Tensor& w : r.optimizer->params()) m.grads += double(w.numel()) * double(w.element_size());
  m.optimizer_state = opt_state;
  m.per_sample = std::max(0.0, m2 - m1) / double(b1);
  m.fixed = m1 - m.per_sample * double(b1);
  m.activations = m.per_sample * double(micro);
  m.step_peak = m.fixed + m.activations + m.optimizer_state;
  const int64_t eval_bs = (c.data.eval_batch_size > 0 ? c.data.eval_batch_size : c.data.batch_size) / nproc;
  const int64_t v1 = std::max<int64_t>(1, eval_bs / 8), v2 = 2 * v1;
  const double e1 = fwd_bwd(v1, false, nullptr), e2 = fwd_bwd(v2, false, nullptr);
  const double eval_per_sample = std::max(0.0, e2 - e1) / double(v1);
  m.eval_peak = e1 + eval_per_sample * double(eval_bs - v1) + m.optimizer_state;
  const double flops_per_sample = (f2 - f1) / double(b1);
  p.flops_per_step = (f1 + flops_per_sample * double(micro - b1)) * double(c.train.accumulate);
  t += str("FLOPs per step per rank: ", json_num(std::round(p.flops_per_step / 1e6) / 1e3),
           " GFLOP (matrix products and convolutions, forward and backward)\n");
  t += str("memory per rank (estimate; what train lines report as mem_peak_mb):\n");
  t += str("  parameters ", mib(m.params), ", gradients ", mib(m.grads), ", optimizer state ", mib(m.optimizer_state),
           " (", r.optimizer->type_name(), ")\n");
  t += str("  activations ", mib(m.activations), " (", mib(m.per_sample), " per sample x ", micro, ")\n");
  t += str("  a training step's peak ~ ", mib(m.step_peak), "; an eval batch of ", eval_bs, " ~ ", mib(m.eval_peak), "\n");
  if (nproc > 1) {
    // [dist] shard (distributed/ddp.h). The step measured above holds every gradient once, as
    // backward makes them; DDP adds its buckets (a second copy), ZeRO-1 too but keeps 1/nproc of
    // the optimizer state; ZeRO-2 frees each gradient once it is in its bucket and keeps 1/nproc
    // of the reduced ones, the full ones living one bucket at a time.
    const double bucket = std::min(m.grads, c.dist.bucket_mb * 1024 * 1024);
    const double base = m.step_peak - m.optimizer_state - m.grads;  // without gradients and state
    p.shards.push_back({"none", 2 * m.grads, m.optimizer_state, base + 2 * m.grads + m.optimizer_state});
    p.shards.push_back({"optimizer", 2 * m.grads, m.optimizer_state / nproc, base + 2 * m.grads + m.optimizer_state / nproc});
    const double g2 = m.grads / nproc + bucket;
    p.shards.push_back({"gradients", g2, m.optimizer_state / nproc, base + g2 + m.optimizer_state / nproc});
    t += str("memory per rank by [dist] shard (", nproc, " ranks; this config: \"", c.dist.shard, "\"):\n");
    for (const ShardMemoryPlan& sp : p.shards)
      t += str("  ", sp.shard, std::string(10 - sp.shard.size(), ' '), "gradient memory ", mib(sp.grads), ", optimizer state ",
               mib(sp.optimizer_state), ", a training step's peak ~ ", mib(sp.step_peak), "\n");
  }

  // ---- the LR schedule, stepped as the trainer steps it ----
  std::vector<std::vector<double>> lrs(group_names.size());
  for (int64_t s = 0; s < r.total_steps; ++s) {
    const std::vector<double> now = r.optimizer->lrs();
    for (size_t g = 0; g < lrs.size(); ++g) lrs[g].push_back(now[g]);
    if (r.scheduler) {
      r.scheduler->optimizer_stepped();
      if (r.scheduler->interval() == "step") r.scheduler->step();
      else if ((s + 1) % r.steps_per_epoch == 0) r.scheduler->step();
    }
  }
  io::Chart lr_chart{"learning rate (planned)", "step", "lr", {}, false};
  t += str("lr schedule (", r.scheduler ? str((*c.scheduler.table)["type"].value_or(std::string("?")), ", per ", r.scheduler->interval())
                                        : std::string("constant"), "):\n");
  for (size_t g = 0; g < lrs.size(); ++g) {
    const auto& v = lrs[g];
    if (v.empty()) continue;
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    t += str("  ", group_names[g], ": ", json_num(v.front()), " -> ", json_num(v.back()), " (min ", json_num(*lo), ", max ",
             json_num(*hi), ")  ", sparkline(v), "\n");
    io::Series se{group_names[g], {}, v, g > 0, int(g)};
    for (size_t s = 0; s < v.size(); ++s) se.x.push_back(double(s + 1));
    lr_chart.series.push_back(std::move(se));
    if (*hi == 0) p.warnings.push_back(str("param group '", group_names[g], "' has lr 0 for the whole run: its parameters never ",
                                           "change (frozen = true says so, and saves its gradients and state)"));
    else if (v.size() > 1 && v.back() > v.front() && std::is_sorted(v.begin(), v.end()))
      p.warnings.push_back(str("the lr of param group '", group_names[g], "' rises over the whole run (", json_num(v.front()),
                               " -> ", json_num(v.back()), "): is the warmup longer than the run's ", r.total_steps, " steps?"));
  }
  p.charts.push_back(lr_chart);
  for (const std::string& w : p.warnings) t += "warning: " + w + "\n";
  return p;
}

}  // namespace tr::train
