// The training loop: fit() in named steps, train_step (accumulation, autocast, GradScaler,
// clipping, the scheduler's per-step interval), evaluation, and the cadence of logs, evals,
// checkpoints and stops.
#include "train/trainer.h"
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include "core/allocator.h"
#include "core/cuda_hooks.h"
#include "core/grad_mode.h"
#include "core/rng.h"
#include "io/checkpoint_dir.h"
#include "io/safetensors.h"
#include "ops/autocast.h"
#include "ops/backends.h"
#include "ops/flop_counter.h"
#include "ops/ops.h"
#include "optim/clip_grad.h"
#include "train/nonfinite_forensics.h"

namespace tr::train {

namespace fs = std::filesystem;

void Trainer::allreduce_sum(std::vector<double>& values, const char* what) {
  if (run_.pg) run_.pg->allreduce_values(values, distributed::ReduceOp::SUM, what);
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

Tensor Trainer::forward_backward(const std::vector<data::Batch>& micro, int64_t global, bool local, bool* in_backward) {
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

bool Trainer::skip_nonfinite_step(const std::vector<data::Batch>& micro, int64_t global,
                                  const GeneratorState& rng_at_start, StepResult& res) {
  auto& r = run_;
  const std::string& policy = r.cfg.train.nonfinite;
  // Checked before the step is applied. With a loss scaler, inf/NaN gradients are the scaler's to
  // skip (fp16 overflows are expected), so only the loss line's check remains. On a GPU the check
  // is a device sync: "stop" leaves it to the loss line's check (the step is applied), "skip" cannot.
  if (!(policy == "skip" || (policy == "stop" && r.device.is_cpu())) || r.scaler.is_enabled()) return false;
  const std::string what = nonfinite_in_step(r, res.loss);
  if (what.empty()) return false;
  if (policy == "stop")
    stop_nonfinite(r, {next_step_, micro, what, rng_at_start},
                   [&](bool* in_backward) { forward_backward(micro, global, /*local=*/true, in_backward); });
  ++nonfinite_skipped_;
  logger_.progress().message(str("warning: step ", next_step_, ": ", what,
                                 "; the step is skipped ([train] nonfinite = \"skip\", ", nonfinite_skipped_,
                                 " so far)"));
  r.optimizer->zero_grad();
  res.lrs = r.optimizer->lrs();
  res.stepped = false;
  return true;
}

void Trainer::clip_gradients(StepResult& res) {
  auto& r = run_;
  const auto& gc = r.cfg.train.grad_clip;
  if (gc.value <= 0 && gc.max_norm <= 0) return;
  r.scaler.unscale_(*r.optimizer);               // clip the true gradients; a no-op without a scaler
  if (r.scaler.found_inf(*r.optimizer)) return;  // an overflowed step is skipped, unclipped
  std::vector<Tensor> params = r.optimizer->params();
  if (gc.value > 0) optim::clip_grad_value(params, gc.value);
  const auto on_device = [&](double v) { return full({}, v, TensorOptions(DType::F64).device(r.device)); };
  if (gc.max_norm > 0 && r.sharded_optimizer)  // the shards' partial norms, combined over the ranks
    res.grad_norm = on_device(optim::clip_grad_norm(
        params, gc.max_norm, gc.norm_type, gc.error_if_nonfinite,
        [&](double partial, bool is_max) { return r.sharded_optimizer->reduce(partial, is_max); }));
  else if (gc.max_norm > 0 && gc.error_if_nonfinite)  // the check reads the norm (a host wait)
    res.grad_norm = on_device(optim::clip_grad_norm(params, gc.max_norm, gc.norm_type, true));
  else if (gc.max_norm > 0)  // stays on the device until the log line reads it
    res.grad_norm = optim::clip_grad_norm_tensor(params, gc.max_norm, gc.norm_type);
}

StepResult Trainer::train_step(const std::vector<data::Batch>& micro) {
  auto& r = run_;
  int64_t global = 0;
  for (auto& b : micro) global += b.global_size;
  const GeneratorState rng_at_start = default_generator().get_state();  // for the "stop" re-run
  r.optimizer->zero_grad();
  StepResult res;
  res.loss = forward_backward(micro, global);
  cuda::Range range("step");  // clipping, the optimizer, the scaler, the schedule (profilers' phase)
  if (skip_nonfinite_step(micro, global, rng_at_start, res)) return res;
  clip_gradients(res);
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

// ---- fit ----

void Trainer::prepare_run_dir() {
  if (!run_.is_main()) return;  // rank 0 writes the run directory; the other ranks only read it
  lock_ = std::make_unique<io::RunLock>(run_.cfg.run_dir());  // before anything in it is touched
  if (fs::exists(checkpointer_.root())) io::clean_temporaries(checkpointer_.root());
}

void Trainer::write_resolved_config() {
  if (!run_.is_main()) return;
  std::ofstream f(run_.cfg.run_dir() + "/config.toml");
  f << config::to_toml(run_.cfg);
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

EvalResult Trainer::evaluate_ema() {
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
  return evaluate(run_.ema->module());
}

void Trainer::eval_and_log(Loop& l) {
  if (run_.watchdog) run_.watchdog->begin(str("eval after step ", l.step));
  flush_steps(0);  // the train lines before the eval line
  const EvalResult e = evaluate();
  l.result.last_eval = e;
  checkpointer_.evaluated(e);
  std::optional<EvalResult> ema;
  if (run_.ema) {  // the EMA weights on the same eval set, keys beside the model's
    ema = evaluate_ema();
    l.result.last_ema_eval = ema;
  }
  logger_.eval_line(l.step, l.epoch, e, ema);
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
        logger_.progress().message(
            str("warning: step ", p.step, ": the loss is ", json_num(v[i]), " ([train] nonfinite = \"warn\")"));
    }
    logger_.progress().step(p.step, p.epoch, v[i], p.samples, p.grad_norm.defined() ? norms[n_norm++] : -1.0);
  }
  pending_.clear();
  last_flush_ = std::chrono::steady_clock::now();
  return agreed_signal(v.back(), local_signal);
}

void Trainer::save_checkpoint(const TrainPosition& pos) {
  if (run_.watchdog) run_.watchdog->begin(str("checkpoint at step ", pos.step));
  flush_steps(0);  // the progress window it saves
  checkpointer_.save(pos, {logger_.progress().window_state(), logger_.records(), nonfinite_skipped_});
}

bool Trainer::after_step(Loop& l, const std::vector<data::Batch>& micro, const StepResult& sr, StopSignal& stop) {
  checkpointer_.poll();  // a background write that failed is reported by the first step that finds it ended
  int64_t samples = 0;
  for (auto& b : micro) samples += b.global_size;  // all ranks: samples_per_s is the run's throughput
  pending_.push_back({l.step, l.epoch, sr.loss, samples, sr.grad_norm});
  const auto& ck = run_.cfg.checkpoint;
  const int64_t every_eval = run_.cfg.train.eval_every;
  const bool mid_epoch = !run_.loader->epoch_done() && l.step < run_.total_steps;
  const bool eval_due = every_eval > 0 && l.step % every_eval == 0 && mid_epoch;
  const bool checkpoint_due = ck.every > 0 && l.step % ck.every == 0 && mid_epoch;
  Progress& progress = logger_.progress();
  const bool log_due = progress.log_due(l.step);
  // the live line is refreshed twice a second (in a single process: the timing differs per rank)
  const bool display_due =
      !run_.pg && progress.live() && std::chrono::steady_clock::now() - last_flush_ > std::chrono::milliseconds(500);
  const int local_sig = stop.pending();
  int sig = 0;
  if (run_.device.is_cpu() || log_due || eval_due || checkpoint_due || l.step == stop_at_step_ || display_due) {
    sig = flush_steps(local_sig);
  } else if (!run_.pg || l.step % kSignalCheckSteps == 0) {
    if ((sig = agree_signal(local_sig)) != 0) flush_steps(0);
  }
  // the lrs the step used, as torch's get_last_lr() before scheduler.step()
  if (pending_.empty()) progress.show(l.step, l.epoch, sr.lrs, display_due);
  if (log_due) logger_.train_line(l.step, l.epoch, sr.lrs, nonfinite_skipped_);
  logger_.histograms(l.step);
  // (the last step of an epoch or of the run is evaluated by end_epoch, once)
  if (eval_due) eval_and_log(l);
  if (sig || l.step == stop_at_step_) {
    stop_here(l, sig);
    return false;
  }
  if (checkpoint_due) {
    save_checkpoint({l.step, l.epoch, run_.loader->position().batch});
    l.saved_last = true;
  }
  return true;
}

void Trainer::stop_here(Loop& l, int signal) {
  save_checkpoint({l.step, l.epoch, run_.loader->position().batch});
  checkpointer_.wait();
  logger_.progress().message(str("stopped ", signal ? str("by signal ", signal) : std::string("as asked"), " at step ",
                                 l.step, "; checkpoint written to ", checkpointer_.root(), "/",
                                 io::checkpoint_name(l.step), " (continue with --resume auto)"));
  l.result.stopped_by_signal = signal;
  l.result.stopped_at_step = !signal;
}

bool Trainer::train_epoch(Loop& l, StopSignal& stop) {
  run_.loader->begin_epoch(l.epoch, l.epoch == l.start.epoch ? l.start.batch : 0);
  std::vector<data::Batch> micro;
  while (l.step < run_.total_steps && next_micro_batches(micro)) {
    logger_.first_step_starting();
    if (run_.watchdog) run_.watchdog->begin(str("step ", l.step + 1), l.step + 1);
    next_step_ = l.step + 1;
    StepResult sr;
    if (!logger_.step_flops_counted()) {  // the first step of this process: count its FLOPs for MFU
      FlopCounter counter;
      sr = train_step(micro);
      logger_.set_step_flops(counter.flops());
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
  if (ck.save_final && !stopped) checkpointer_.write_final_weights(l.step);
  checkpointer_.wait();  // (the final weights were written while the last checkpoint was)
  logger_.close();
  if (!stopped) logger_.done(l.step, l.result.seconds, l.result.last_eval, l.result.last_ema_eval);
}

FitResult Trainer::fit() {
  prepare_run_dir();
  const std::optional<CheckpointState> resumed = checkpointer_.resume(resume_);
  Loop l;
  if (resumed) {
    l.start = {resumed->step, resumed->epoch, resumed->batch};
    nonfinite_skipped_ = resumed->nonfinite_skipped;
  }
  l.step = l.start.step;
  l.epoch = l.start.epoch;
  write_resolved_config();
  logger_.open(l.start.step, resumed);
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
