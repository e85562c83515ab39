// The training loop: fit() in named steps, train_step (accumulation, autocast, GradScaler,
// clipping, the scheduler's per-step interval) and evaluation.
#include "train/trainer.h"
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include "core/allocator.h"
#include "core/cuda_hooks.h"
#include "core/grad_mode.h"
#include "io/checkpoint_dir.h"
#include "io/safetensors.h"
#include "ops/autocast.h"
#include "ops/backends.h"
#include "ops/flop_counter.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "core/rng.h"
#include "optim/clip_grad.h"
#include "optim/optimizer_state.h"
#include "train/mfu.h"
#include "train/process_clock.h"

namespace tr::train {

namespace fs = std::filesystem;
using nlohmann::json;

void Trainer::allreduce_sum(std::vector<double>& values, const char* what) {
  if (run_.pg) run_.pg->allreduce_values(values, distributed::ReduceOp::SUM, what);
}

void Trainer::log_record(const std::string& json) {
  if (metrics_) metrics_->write(json);
  if (tensorboard_) tensorboard_->add_record(json);
}

void Trainer::log_histograms(int64_t step) {
  for (const auto& [name, p] : run_.model.net->named_parameters()) {
    tensorboard_->add_histogram("weights/" + name, p.detach().to(kCPU).tolist(), step);
    if (p.grad().defined()) tensorboard_->add_histogram("grads/" + name, p.grad().to(kCPU).tolist(), step);
  }
}

EvalResult Trainer::evaluate() { return evaluate(*run_.model.net); }

// Evaluation (eval_batch_size, no graph) allocates other sizes than training: the CPU allocator's
// cached blocks of one phase cannot serve the other, so they are returned to the system at each
// switch, and peak memory is the larger phase's instead of their sum (fmnist_cnn, eval batch 1000:
// 508 -> 416 MB). The price is one round of page faults per evaluation.
EvalResult Trainer::evaluate(nn::Module& net) {
  allocator_for(kCPU).empty_cache();
  NoGradGuard ng;
  const auto& cfg = run_.cfg;
  const bool was_training = net.is_training();
  net.eval();
  int64_t bs = cfg.data.eval_batch_size > 0 ? cfg.data.eval_batch_size : cfg.data.batch_size;
  data::DataLoaderOptions lo;
  lo.batch_size = bs;
  lo.seed = uint64_t(cfg.run.seed);
  lo.world_size = run_.env.world_size;  // each rank scores its slice of every eval batch; sums are reduced
  lo.rank = run_.env.rank;
  data::DataLoader loader(run_.data.eval, lo);
  loader.begin_epoch(0);
  double loss_sum = 0;
  int64_t correct = 0, count = 0, batches = 0;
  while (auto b = loader.next()) {
    if (cfg.train.eval_batches > 0 && batches >= cfg.train.eval_batches) break;
    ++batches;
    if (!b->input.defined()) continue;  // this rank's slice of a last batch smaller than the world
    Tensor x = run_.to_run(b->input), y = run_.to_run(b->target);
    amp::AutocastGuard autocast(run_.device.type, run_.amp_dtype(), cfg.amp.enabled);  // the model as it trains
    auto [loss, corr] = run_.loss(net(x), y);
    int64_t n = y.numel();
    loss_sum += loss.item() * double(n);
    if (corr.defined()) correct += int64_t(corr.item());
    count += n;
  }
  net.train(was_training);
  allocator_for(kCPU).empty_cache();
  std::vector<double> sums{loss_sum, double(correct), double(count)};
  allreduce_sum(sums, "the eval sums");
  loss_sum = sums[0];
  correct = int64_t(sums[1]);
  count = int64_t(sums[2]);
  EvalResult r;
  r.count = count;
  r.loss = count ? loss_sum / double(count) : 0.0;
  if (run_.loss.classification()) r.accuracy = count ? double(correct) / double(count) : 0.0;
  return r;
}

Tensor Trainer::forward_backward(const std::vector<data::Batch>& micro, int64_t global, bool local,
                                 bool* in_backward) {
  // The step's loss is the mean over all N samples of its micro-batches on all ranks:
  //   L = sum_ranks sum_i (n_i / N) * loss_i
  // Each rank back-propagates its terms times world_size (DDP averages the gradients over the
  // ranks), so the gradients equal one batch of N samples in one process. It returns its part of L.
  auto& r = run_;
  const double world = double(r.env.world_size);
  Tensor loss_part;  // stays on the device: read back by flush_steps
  for (size_t i = 0; i < micro.size(); ++i) {
    const data::Batch& b = micro[i];
    TR_CHECK(b.input.defined(), "rank ", r.env.rank, " got no samples of batch ", b.index, " (", b.global_size,
             " samples for ", r.env.world_size, " ranks); use drop_last = true or a batch size that fills every rank");
    if (r.ddp) r.ddp->prepare(!local && i + 1 == micro.size());  // gradients are averaged on the last micro-batch
    Tensor x = r.to_run(b.input), y = r.to_run(b.target);
    Tensor loss;
    {
      cuda::Range range("forward");
      amp::AutocastGuard autocast(r.device.type, r.amp_dtype(), r.cfg.amp.enabled);  // forward and loss only
      // on a GPU the parameters the last forward cast are cast here in one launch (their
      // gradients back in one), not one launch each at their first use
      const bool precast = r.cfg.amp.enabled && r.device.is_cuda() && backends::fusion().enabled;
      if (precast) amp::precast_parameters(cast_params_);
      loss = r.loss((*r.model.net)(x), y).first;
      if (precast) cast_params_ = amp::cast_parameters();
    }
    const double n = double(x.size(0));
    Tensor part = cast(loss.detach(), DType::F64) * n / double(global);
    loss_part = loss_part.defined() ? loss_part + part : part;
    double w = n * world / double(global);
    if (w != 1.0) loss = loss * w;
    if (in_backward) *in_backward = true;
    {
      cuda::Range range("backward");
      r.scaler.scale(loss).backward();
    }
    if (in_backward) *in_backward = false;
  }
  if (r.ddp && !local) {
    cuda::Range range("step");  // the gradients' reduction belongs to the step's phase, as in train_step
    r.ddp->finish();
  }
  return loss_part;
}

std::string Trainer::nonfinite_in_step(const Tensor& loss_part) {
  std::string what;
  // with ranks, each holds only its part of the loss: the gradients (equal on every rank after the
  // allreduce) decide, so that every rank decides alike; the loss line's check follows the step
  if (!run_.pg && !std::isfinite(loss_part.item())) what = str("the loss is ", json_num(loss_part.item()));
  std::vector<Tensor> grads;
  for (const Tensor& p : run_.optimizer->params()) grads.push_back(p.grad());
  bool bad = any_non_finite(grads).item() != 0;
  if (run_.sharded_optimizer) bad = run_.sharded_optimizer->any(bad);  // each rank holds a shard of them
  if (bad) what += str(what.empty() ? "" : " and ", "the gradients hold an inf or a NaN");
  return what;
}

StepResult Trainer::train_step(const std::vector<data::Batch>& micro) {
  auto& r = run_;
  int64_t global = 0;
  for (auto& b : micro) global += b.global_size;
  const std::string& policy = r.cfg.train.nonfinite;
  const GeneratorState rng_at_start = default_generator().get_state();  // for the "stop" re-run
  r.optimizer->zero_grad();
  StepResult res;
  res.loss = forward_backward(micro, global);
  cuda::Range range("step");  // clipping, the optimizer, the scaler, the schedule (profilers' phase)
  // [train] nonfinite: checked before the step is applied. With a loss scaler, inf/NaN gradients
  // are the scaler's to skip (fp16 overflows are expected), so only the loss line's check remains.
  // On a GPU the check is a device sync: "stop" leaves it to the loss line's check (the step is
  // applied), "skip" cannot.
  if ((policy == "skip" || (policy == "stop" && r.device.is_cpu())) && !r.scaler.is_enabled()) {
    const std::string what = nonfinite_in_step(res.loss);
    if (!what.empty()) {
      if (policy == "stop") stop_nonfinite(micro, global, what, rng_at_start);
      ++nonfinite_skipped_;
      progress_->message(str("warning: step ", next_step_, ": ", what, "; the step is skipped ([train] nonfinite = \"skip\", ",
                             nonfinite_skipped_, " so far)"));
      r.optimizer->zero_grad();
      res.lrs = r.optimizer->lrs();
      res.stepped = false;
      return res;
    }
  }
  const auto& gc = r.cfg.train.grad_clip;
  if (gc.value > 0 || gc.max_norm > 0) {
    r.scaler.unscale_(*r.optimizer);  // clip the true gradients; a no-op without a scaler
    if (!r.scaler.found_inf(*r.optimizer)) {  // an overflowed step is skipped below, unclipped
      std::vector<Tensor> params = r.optimizer->params();
      if (gc.value > 0) optim::clip_grad_value(params, gc.value);
      const auto on_device = [&](double v) { return full({}, v, TensorOptions(DType::F64).device(r.device)); };
      if (gc.max_norm > 0 && r.sharded_optimizer)  // the shards' partial norms, combined over the ranks
        res.grad_norm = on_device(optim::clip_grad_norm(params, gc.max_norm, gc.norm_type, gc.error_if_nonfinite,
                                              [&](double partial, bool is_max) { return r.sharded_optimizer->reduce(partial, is_max); }));
      else if (gc.max_norm > 0 && gc.error_if_nonfinite)  // the check reads the norm (a host wait)
        res.grad_norm = on_device(optim::clip_grad_norm(params, gc.max_norm, gc.norm_type, true));
      else if (gc.max_norm > 0)  // stays on the device until the log line reads it
        res.grad_norm = optim::clip_grad_norm_tensor(params, gc.max_norm, gc.norm_type);
    }
  }
  res.lrs = r.optimizer->lrs();  // what this step uses: the line logged for it shows these
  res.stepped = r.scaler.step(*r.optimizer);
  r.scaler.update();
  // sharded: each rank stepped its shard; the parameters are whole again before anything reads them
  if (r.ddp && res.stepped) r.ddp->gather_params();
  // The EMA follows the steps taken; a skipped step changed no weight, so it adds no average.
  if (r.ema && res.stepped) r.ema->update_parameters(*r.model.net);
  // A skipped step leaves the schedule where it was (torch would advance it and warn).
  if (r.scheduler && res.stepped) {
    r.scheduler->optimizer_stepped();
    if (r.scheduler->interval() == "step") r.scheduler->step();
  }
  return res;
}

void Trainer::stop_nonfinite(const std::vector<data::Batch>& micro, int64_t global, const std::string& what,
                             const GeneratorState& rng_at_start) {
  auto& r = run_;
  // the batch's samples, for reproducing the step outside the run
  nlohmann::json j;
  j["step"] = next_step_;
  j["what"] = what;
  for (const auto& b : micro) {
    j["epoch"] = b.epoch;
    j["batches"].push_back({{"index", b.index}, {"indices", b.indices}});
  }
  const std::string file = str(r.cfg.run_dir(), "/nonfinite_step_", next_step_,
                               r.env.active() ? str("_rank", r.env.rank) : std::string(), ".json");
  {
    std::filesystem::create_directories(r.cfg.run_dir());
    std::ofstream f(file);
    f << j.dump() << "\n";
  }
  // the same step again, from the same random state (dropout), with every op checked and the
  // layer being run recorded; gradients stay local (no collective that other ranks would not join)
  std::vector<std::string> layers;  // the modules whose forward has begun and not ended
  std::vector<std::pair<nn::Module*, std::pair<int, int>>> hooks;
  for (auto& [name, m] : r.model.net->named_modules()) {
    const std::string label = name.empty() ? m->type_name() : str("'", name, "' (", m->type_name(), ")");
    const int pre = m->register_forward_pre_hook([&layers, label](nn::Module&, const std::vector<Tensor>&) {
      layers.push_back(label);
      return std::vector<Tensor>();
    });
    const int post = m->register_forward_hook([&layers](nn::Module&, const std::vector<Tensor>&, const Tensor&) {
      if (!layers.empty()) layers.pop_back();
      return Tensor();
    });
    hooks.push_back({m, {pre, post}});
  }
  std::string culprit;
  default_generator().set_state(rng_at_start);
  r.optimizer->zero_grad();
  bool in_backward = false;
  NonFiniteOpCheck::set_enabled(true);
  try {
    forward_backward(micro, global, /*local=*/true, &in_backward);
  } catch (const NonFiniteOpError& e) {
    culprit = str(e.what(), in_backward ? std::string(" in the backward pass")
                                          : layers.empty() ? std::string(" in the loss")
                                                           : " in layer " + layers.back() + " (forward)");
  }
  NonFiniteOpCheck::set_enabled(false);
  for (auto& [m, h] : hooks) {
    m->remove_hook(h.first);
    m->remove_hook(h.second);
  }
  if (culprit.empty()) {
    std::vector<std::string> bad;
    for (const auto& [name, p] : r.model.net->named_parameters())
      if (any_non_finite({p}).item() != 0) bad.push_back(name);
    culprit = bad.empty() ? std::string("the re-run made no inf or NaN from finite values (the step is not reproducible)")
                          : str("no op made one from finite inputs: the parameters already hold one (", bad,
                                "): an earlier step applied it");
  }
  throw Error(str("training diverged at step ", next_step_, " (epoch ", micro.front().epoch, "): ", what, "; ", culprit,
                  ". The step was not applied; the batch's sample indices are in ", file, ". Lower [optimizer] lr (now ",
                  json_num(r.optimizer->lrs()[0]), "), clip gradients ([train] grad_clip), or skip such steps with [train] "
                  "nonfinite = \"skip\""));
}

// ---- fit ----

void Trainer::prepare_run_dir() {
  if (!run_.is_main()) return;  // rank 0 writes the run directory; the other ranks only read it
  lock_ = std::make_unique<io::RunLock>(run_.cfg.run_dir());  // before anything in it is touched
  if (fs::exists(checkpoint_root())) io::clean_temporaries(checkpoint_root());
}

std::optional<CheckpointState> Trainer::restore_if_asked() {
  auto dir = resume_dir();
  if (!dir) return std::nullopt;
  return restore_checkpoint(*dir);
}

void Trainer::write_resolved_config() {
  if (!run_.is_main()) return;
  std::ofstream f(run_.cfg.run_dir() + "/config.toml");
  f << config::to_toml(run_.cfg);
}

void Trainer::open_metrics(const std::optional<CheckpointState>& resumed) {
  resumed_records_ = resumed ? resumed->metrics_lines : 0;
  if (run_.cfg.log.tensorboard && run_.is_main()) {
    tensorboard_ = std::make_unique<io::SummaryWriter>(
        run_.cfg.run_dir(), resumed ? resumed->step : -1);
    // the resolved config, as torch users add hparams: indented, so the text plugin shows it as code
    if (!resumed) {
      std::string text, line;
      std::istringstream in(config::to_toml(run_.cfg));
      while (std::getline(in, line)) text += "    " + line + "\n";
      tensorboard_->add_text("config", text, 0);
    }
  }
  if (!run_.cfg.log.jsonl) return;
  metrics_ = std::make_unique<io::JsonlMetricsSink>(run_.cfg.run_dir() + "/metrics.jsonl", run_.is_main(),
                                                    resumed ? resumed_records_ : -1);
}

void Trainer::open_progress(const TrainPosition& start, const std::optional<CheckpointState>& resumed) {
  const auto& cfg = run_.cfg;
  progress_ = std::make_unique<Progress>(run_.is_main() ? cfg.log.progress : "none", run_.total_steps,
                                         cfg.train.log_every, start.step);
  if (resumed) progress_->restore_window(resumed->progress_window);
  const int64_t acc = cfg.train.accumulate;
  progress_->message(str("run ", cfg.run.name, ": ", run_.data.train->describe(), ", ", run_.model.net->num_parameters(),
                         " parameters, ", cfg.optimizer.type, " on ", run_.device.str(), ", ", run_.total_steps,
                         " steps (", run_.epochs(), " epochs of ", run_.steps_per_epoch,
                         acc > 1 ? str(", ", acc, " micro-batches each") : "", ")",
                         run_.env.active() ? str(", ", run_.env.world_size, " ranks (", run_.pg->describe(), ")") : "",
                         resumed ? str("; resumed at step ", start.step) : ""));
}

bool Trainer::next_micro_batches(std::vector<data::Batch>& micro) {
  micro.clear();
  while (int64_t(micro.size()) < run_.cfg.train.accumulate) {
    auto b = run_.loader->next();
    if (!b) break;
    micro.push_back(std::move(*b));
  }
  return !micro.empty();
}

void Trainer::eval_and_log(Loop& l) {
  if (run_.watchdog) run_.watchdog->begin(str("eval after step ", l.step));
  flush_steps(0);  // the train lines before the eval line
  EvalResult e = evaluate();
  l.result.last_eval = last_eval_ = e;
  evaluated_since_checkpoint_ = true;
  std::string ema;
  if (run_.ema) {  // the EMA weights on the same eval set, keys beside the model's
    if (run_.pg) {
      // The ranks' parameters are equal, their BatchNorm statistics not (each updates them from
      // its own slice of the batch), nor their averages: every rank scores rank 0's, which is
      // what checkpoints hold, so a resumed run scores the same.
      NoGradGuard ng;
      for (auto& [name, b] : run_.ema->module().named_buffers()) {
        Tensor t = b;
        run_.pg->broadcast(t, 0);
      }
    }
    EvalResult m = evaluate(run_.ema->module());
    l.result.last_ema_eval = m;
    ema = str(",\"ema_loss\":", json_num(m.loss), m.accuracy ? str(",\"ema_accuracy\":", json_num(*m.accuracy)) : "");
    progress_->eval(l.step, l.epoch, e.loss, e.accuracy, EvalScores{m.loss, m.accuracy});
  } else {
    progress_->eval(l.step, l.epoch, e.loss, e.accuracy);
  }
  log_record(str("{\"split\":\"eval\",\"step\":", l.step, ",\"epoch\":", l.epoch, ",\"loss\":", json_num(e.loss),
                 e.accuracy ? str(",\"accuracy\":", json_num(*e.accuracy)) : std::string(), ema, "}"));
}

namespace {
// Between log lines, ranks on GPUs agree on a stop signal every this many steps: the agreement is
// a collective the host waits for, and a preemption notice allows tens of seconds.
constexpr int64_t kSignalCheckSteps = 10;
// The signal every rank stops for, from the sum over the ranks of their signal numbers: this
// rank's own, or SIGTERM for one that came to another rank.
int agreed_signal(double summed, int local_signal) { return summed > 0 ? (local_signal ? local_signal : SIGTERM) : 0; }
}  // namespace

int Trainer::agree_signal(int local_signal) {
  if (!run_.pg) return local_signal;
  std::vector<double> v{double(local_signal)};
  allreduce_sum(v, "the stop signal");
  return agreed_signal(v[0], local_signal);
}

int Trainer::flush_steps(int local_signal) {
  if (pending_.empty() && local_signal == 0) return 0;  // every rank: pending steps are the same
  std::vector<double> v, norms;  // the losses, then the defined gradient norms: one copy for both
  if (!pending_.empty()) {
    std::vector<Tensor> values;
    for (const auto& p : pending_) values.push_back(p.loss.reshape({1}));
    for (const auto& p : pending_)
      if (p.grad_norm.defined()) values.push_back(cast(p.grad_norm, DType::F64).to(p.loss.device()).reshape({1}));
    v = cat(values, 0).to(kCPU).tolist();
    norms.assign(v.begin() + int64_t(pending_.size()), v.end());
    v.resize(pending_.size());
  }
  // one small collective: the losses summed over the ranks, and whether any rank was signalled
  // (every rank must stop after the same step, or the others would wait in a collective)
  v.push_back(double(local_signal));
  allreduce_sum(v, "the steps' losses and the stop signal");
  size_t n_norm = 0;
  for (size_t i = 0; i < pending_.size(); ++i) {
    const PendingStep& p = pending_[i];
    // the backstop of [train] nonfinite = "stop" (with a loss scaler, or with ranks, whose loss
    // parts are summed here); "skip" has already left such a step out, "warn" goes on
    if (!std::isfinite(v[i])) {
      TR_CHECK(run_.cfg.train.nonfinite != "stop", "training diverged: the loss is ", v[i], " at step ", p.step,
               " (epoch ", p.epoch, "); lower [optimizer] lr (now ", run_.optimizer->lrs()[0], ")");
      if (run_.cfg.train.nonfinite == "warn")
        progress_->message(str("warning: step ", p.step, ": the loss is ", json_num(v[i]), " ([train] nonfinite = \"warn\")"));
    }
    progress_->step(p.step, p.epoch, v[i], p.samples, p.grad_norm.defined() ? norms[n_norm++] : -1.0);
  }
  pending_.clear();
  last_flush_ = std::chrono::steady_clock::now();
  return agreed_signal(v.back(), local_signal);
}

std::string Trainer::memory_fields() {
  auto mb = [](double bytes) { return std::round(bytes / (1 << 20) * 10) / 10; };
  const double peak = double(max_memory_allocated(run_.device));
  const double state = double(optim::state_bytes(*run_.optimizer));
  const MemoryStats ms = memory_stats(run_.device);  // reserved: what the caching allocator holds, cache included
  std::string r = str(",\"mem_peak_mb\":", json_num(mb(peak)), ",\"mem_reserved_mb\":", json_num(mb(double(ms.reserved))),
                      ",\"mem_peak_reserved_mb\":", json_num(mb(double(ms.peak_reserved))),
                      ",\"optimizer_state_mb\":", json_num(mb(state)));
  if (!run_.pg) return r;
  // every rank's, for sharding: each rank fills its two slots, the sum gathers them
  const int w = run_.env.world_size, me = run_.env.rank;
  std::vector<double> v(size_t(2 * w), 0.0);
  v[size_t(me)] = peak;
  v[size_t(w + me)] = state;
  allreduce_sum(v, "the ranks' memory figures");
  std::vector<double> peaks, states;
  for (int i = 0; i < w; ++i) {
    peaks.push_back(mb(v[size_t(i)]));
    states.push_back(mb(v[size_t(w + i)]));
  }
  return str(r, ",\"mem_peak_mb_per_rank\":", nlohmann::json(peaks).dump(), ",\"optimizer_state_mb_per_rank\":",
             nlohmann::json(states).dump());
}

std::string Trainer::mfu_fields() {
  if (peak_flops_ == 0) {  // once, outside the timed window
    const auto t0 = std::chrono::steady_clock::now();
    const DType t = run_.cfg.amp.enabled ? run_.amp_dtype() : run_.dtype();
    const std::string file = default_peaks_file();
    const MatmulPeak peak = matmul_peak(run_.device, t, file);
    peak_flops_ = peak.flops;
    progress_->exclude_from_window(std::chrono::steady_clock::now() - t0);
    progress_->message(str("MFU: ", json_num(step_flops_ / 1e9), " GFLOP per step on each rank (matrix products and ",
                           "convolutions, forward and backward) against a ", dtype_name(t), " matmul peak of ",
                           json_num(std::round(peak_flops_ / 1e8) / 10), " GFLOP/s on ", run_.device.str(),
                           peak.cached ? str(" (measured once on this machine, kept in ", file, ")")
                                       : file.empty() ? std::string(" (measured by this run)")
                                                      : str(" (measured now, kept in ", file, " for later runs)")));
  }
  const double mfu = step_flops_ * progress_->steps_per_s() / peak_flops_;
  return str(",\"flops_per_step\":", json_num(step_flops_), ",\"peak_flops\":", json_num(std::round(peak_flops_)),
             ",\"mfu\":", json_num(std::round(mfu * 1e4) / 1e4));
}

bool Trainer::after_step(Loop& l, const std::vector<data::Batch>& micro, const StepResult& sr, StopSignal& stop) {
  collect_checkpoint_write(false);  // a background write that failed is reported by the first step that finds it ended
  int64_t samples = 0;
  for (auto& b : micro) samples += b.global_size;  // all ranks: samples_per_s is the run's throughput
  pending_.push_back({l.step, l.epoch, sr.loss, samples, sr.grad_norm});
  const auto& ck = run_.cfg.checkpoint;
  const int64_t every_eval = run_.cfg.train.eval_every;
  const bool mid_epoch = !run_.loader->epoch_done() && l.step < run_.total_steps;
  const bool eval_due = every_eval > 0 && l.step % every_eval == 0 && mid_epoch;
  const bool checkpoint_due = ck.every > 0 && l.step % ck.every == 0 && mid_epoch;
  const bool log_due = progress_->log_due(l.step);
  // the live line is refreshed twice a second (in a single process: the timing differs per rank)
  const bool display_due = !run_.pg && progress_->live() &&
                           std::chrono::steady_clock::now() - last_flush_ > std::chrono::milliseconds(500);
  const int local_sig = stop.pending();
  int sig = 0;
  if (run_.device.is_cpu() || log_due || eval_due || checkpoint_due || l.step == stop_at_step_ || display_due) {
    sig = flush_steps(local_sig);
  } else if (!run_.pg || l.step % kSignalCheckSteps == 0) {
    if ((sig = agree_signal(local_sig)) != 0) flush_steps(0);
  }
  const std::vector<double>& lrs = sr.lrs;  // the lrs the step used, as torch's get_last_lr() before scheduler.step()
  if (pending_.empty()) progress_->show(l.step, l.epoch, lrs, display_due);
  if (log_due) {
    std::string extra;
    if (run_.scaler.is_enabled())
      extra = str(",\"loss_scale\":", json_num(run_.scaler.get_scale()), ",\"skipped_steps\":", run_.scaler.skipped_steps());
    if (run_.cfg.train.nonfinite == "skip") extra += str(",\"nonfinite_skipped\":", nonfinite_skipped_);
    // the memory tensors held at most since the last line (the CPU's: our allocator's, not the RSS);
    // reset after the first line's matmul-peak measurement, whose matrices are no step's
    extra += memory_fields();
    if (run_.is_main() && step_flops_ > 0) extra += mfu_fields();
    reset_peak_memory_stats(run_.device);
    std::string tail;
    if (startup_s_ && !startup_logged_) {
      tail = str(",\"startup_s\":", json_num(std::round(*startup_s_ * 1000) / 1000));
      startup_logged_ = true;
    }
    log_record(progress_->train_line(l.step, l.epoch, lrs, extra, tail));
  }
  if (tensorboard_ && run_.cfg.log.histograms_every > 0 && l.step % run_.cfg.log.histograms_every == 0)
    log_histograms(l.step);
  // (the last step of an epoch or of the run is evaluated by end_epoch, once)
  if (eval_due) eval_and_log(l);
  if (sig || l.step == stop_at_step_) {
    save_checkpoint({l.step, l.epoch, run_.loader->position().batch});
    wait_for_checkpoint();
    progress_->message(str("stopped ", sig ? str("by signal ", sig) : std::string("as asked"), " at step ", l.step,
                           "; checkpoint written to ", checkpoint_root(), "/", io::checkpoint_name(l.step),
                           " (continue with --resume auto)"));
    l.result.stopped_by_signal = sig;
    l.result.stopped_at_step = !sig;
    return false;
  }
  if (checkpoint_due) {
    save_checkpoint({l.step, l.epoch, run_.loader->position().batch});
    l.saved_last = true;
  }
  return true;
}

bool Trainer::train_epoch(Loop& l, StopSignal& stop) {
  run_.loader->begin_epoch(l.epoch, l.epoch == l.start.epoch ? l.start.batch : 0);
  std::vector<data::Batch> micro;
  while (l.step < run_.total_steps && next_micro_batches(micro)) {
    if (!startup_s_) startup_s_ = seconds_since_process_start();
    if (run_.watchdog) run_.watchdog->begin(str("step ", l.step + 1), l.step + 1);
    next_step_ = l.step + 1;
    StepResult sr;
    if (step_flops_ < 0) {  // the first step of this process: count its FLOPs for MFU
      FlopCounter counter;
      sr = train_step(micro);
      step_flops_ = counter.flops();
    } else {
      sr = train_step(micro);
    }
    ++l.step;
    l.saved_last = false;
    if (!after_step(l, micro, sr, stop)) return false;
  }
  return true;
}

bool Trainer::end_epoch(Loop& l) {
  const bool complete = run_.loader->epoch_done();
  eval_and_log(l);
  if (!complete) return false;
  if (run_.scheduler && run_.scheduler->interval() == "epoch") run_.scheduler->step();
  const auto& ck = run_.cfg.checkpoint;
  const bool last = l.step >= run_.total_steps;
  if (ck.every_epoch || (ck.every > 0 && l.step % ck.every == 0) || (last && ck.save_final)) {
    save_checkpoint({l.step, l.epoch + 1, 0});
    l.saved_last = true;
  }
  return true;
}

void Trainer::finish(Loop& l) {
  if (run_.watchdog) run_.watchdog->begin(str("the end of the run after step ", l.step));
  const auto& ck = run_.cfg.checkpoint;
  const bool stopped = l.result.stopped_by_signal || l.result.stopped_at_step;
  if (!stopped && ck.save_final && !l.saved_last && l.step > l.start.step)
    save_checkpoint({l.step, l.epoch, run_.loader->position().batch});
  l.result.steps = l.step;
  l.result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - l.t0).count();
  if (ck.save_final && !stopped && run_.is_main())
    guard_checkpoint_write(io::kFinalCheckpointName, [&] { write_final_weights(l.step); });
  wait_for_checkpoint();  // (the final weights were written while the last checkpoint was)
  metrics_.reset();
  tensorboard_.reset();
  if (stopped) return;
  const EvalResult& e = l.result.last_eval;
  char startup[64] = "";
  if (startup_s_) std::snprintf(startup, sizeof startup, " (first step %.3f s after process start)", *startup_s_);
  char buf[300];
  int n = std::snprintf(buf, sizeof buf, "done: %lld steps in %.1f s%s; eval loss %.4f", (long long)l.step,
                        l.result.seconds, startup, e.loss);
  if (e.accuracy && n > 0 && size_t(n) < sizeof buf) n += std::snprintf(buf + n, sizeof buf - size_t(n), ", accuracy %.4f", *e.accuracy);
  if (const auto& m = l.result.last_ema_eval; m && n > 0 && size_t(n) < sizeof buf) {
    n += std::snprintf(buf + n, sizeof buf - size_t(n), "; EMA eval loss %.4f", m->loss);
    if (m->accuracy && size_t(n) < sizeof buf) std::snprintf(buf + n, sizeof buf - size_t(n), ", accuracy %.4f", *m->accuracy);
  }
  progress_->message(buf);
}

FitResult Trainer::fit() {
  prepare_run_dir();
  const std::optional<CheckpointState> resumed = restore_if_asked();
  Loop l;
  if (resumed) l.start = {resumed->step, resumed->epoch, resumed->batch};
  l.step = l.start.step;
  l.epoch = l.start.epoch;
  write_resolved_config();
  open_metrics(resumed);
  open_progress(l.start, resumed);
  run_.model.net->train();
  l.t0 = std::chrono::steady_clock::now();
  StopSignal stop;
  while (l.epoch < run_.epochs() && l.step < run_.total_steps) {
    if (!train_epoch(l, stop) || !end_epoch(l)) break;
    ++l.epoch;
  }
  finish(l);
  return l.result;
}

void Trainer::load_weights(const std::string& path) {
  auto tensors = io::load_safetensors(path);
  run_.model.net->load_state_dict(tensors, true);
}

}  // namespace tr::train
