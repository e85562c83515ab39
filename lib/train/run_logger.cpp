#include "train/run_logger.h"
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include "core/allocator.h"
#include "optim/optimizer_state.h"
#include "train/mfu.h"
#include "train/process_clock.h"

namespace tr::train {

void RunLogger::open(int64_t start_step, const std::optional<CheckpointState>& resumed) {
  const auto& cfg = run_.cfg;
  resumed_records_ = resumed ? resumed->metrics_lines : 0;
  if (cfg.log.tensorboard && run_.is_main()) {
    tensorboard_ = std::make_unique<io::SummaryWriter>(cfg.run_dir(), resumed ? resumed->step : -1);
    // the resolved config, as torch users add hparams: indented, so the text plugin shows it as code
    if (!resumed) {
      std::string text, line;
      std::istringstream in(config::to_toml(cfg));
      while (std::getline(in, line)) text += "    " + line + "\n";
      tensorboard_->add_text("config", text, 0);
    }
  }
  if (cfg.log.jsonl)
    metrics_ = std::make_unique<io::JsonlMetricsSink>(cfg.run_dir() + "/metrics.jsonl", run_.is_main(),
                                                      resumed ? resumed_records_ : -1);
  progress_ = std::make_unique<Progress>(run_.is_main() ? cfg.log.progress : "none", run_.total_steps,
                                         cfg.train.log_every, start_step);
  if (resumed) progress_->restore_window(resumed->progress_window);
  const int64_t acc = cfg.train.accumulate;
  progress_->message(str("run ", cfg.run.name, ": ", run_.data.train->describe(), ", ",
                         run_.model.net->num_parameters(), " parameters, ", cfg.optimizer.type, " on ",
                         run_.device.str(), ", ", run_.total_steps, " steps (", run_.epochs(), " epochs of ",
                         run_.steps_per_epoch, acc > 1 ? str(", ", acc, " micro-batches each") : "", ")",
                         run_.env.active() ? str(", ", run_.env.world_size, " ranks (", run_.pg->describe(), ")") : "",
                         resumed ? str("; resumed at step ", start_step) : ""));
}

void RunLogger::close() {
  metrics_.reset();
  tensorboard_.reset();
}

void RunLogger::first_step_starting() {
  if (!startup_s_) startup_s_ = seconds_since_process_start();
}

void RunLogger::write(const MetricsRecord& r) {
  const std::string line = r.str();
  if (metrics_) metrics_->write(line);
  if (tensorboard_) tensorboard_->add_record(line);
}

void RunLogger::train_line(int64_t step, int64_t epoch, const std::vector<double>& lrs, int64_t nonfinite_skipped) {
  // the window's figures come last: the memory figures' collective and the peak's measurement
  // belong to the window they close
  MetricsRecord memory, mfu;
  add_memory(memory);
  if (run_.is_main() && step_flops_ > 0) add_mfu(mfu);
  // the memory tensors held at most since the last line (the CPU's: our allocator's, not the RSS);
  // reset after the first line's matmul-peak measurement, whose matrices are no step's
  reset_peak_memory_stats(run_.device);
  const WindowSummary w = progress_->close_window();
  MetricsRecord r;
  r.add("split", "train").add("step", step).add("epoch", epoch).add("loss", w.loss).add("lr", lrs);
  if (w.grad_norm) r.add("grad_norm", *w.grad_norm);
  if (run_.scaler.is_enabled())
    r.add("loss_scale", run_.scaler.get_scale()).add("skipped_steps", run_.scaler.skipped_steps());
  if (run_.cfg.train.nonfinite == "skip") r.add("nonfinite_skipped", nonfinite_skipped);
  r.append(memory).append(mfu);
  r.add("samples_per_s", std::round(w.samples_per_s * 10) / 10);
  if (startup_s_ && !startup_logged_) {
    r.add("startup_s", std::round(*startup_s_ * 1000) / 1000);
    startup_logged_ = true;
  }
  write(r);
}

// This rank's peak memory since the last line, what its allocator reserves now and at most since
// the last line, and its optimizer state; with ranks, every rank's peak and optimizer state (one
// collective, on log lines, which every rank reaches alike).
void RunLogger::add_memory(MetricsRecord& r) {
  auto mb = [](double bytes) { return std::round(bytes / (1 << 20) * 10) / 10; };
  const double peak = double(max_memory_allocated(run_.device));
  const double state = double(optim::state_bytes(*run_.optimizer));
  const MemoryStats ms = memory_stats(run_.device);  // reserved: what the caching allocator holds, cache included
  r.add("mem_peak_mb", mb(peak)).add("mem_reserved_mb", mb(double(ms.reserved)));
  r.add("mem_peak_reserved_mb", mb(double(ms.peak_reserved))).add("optimizer_state_mb", mb(state));
  if (!run_.pg) return;
  // each rank fills its two slots, the sum gathers them
  const int w = run_.env.world_size, me = run_.env.rank;
  std::vector<double> v(size_t(2 * w), 0.0);
  v[size_t(me)] = peak;
  v[size_t(w + me)] = state;
  run_.pg->allreduce_values(v, distributed::ReduceOp::SUM, "the ranks' memory figures");
  std::vector<double> peaks, states;
  for (int i = 0; i < w; ++i) {
    peaks.push_back(mb(v[size_t(i)]));
    states.push_back(mb(v[size_t(w + i)]));
  }
  r.add_json("mem_peak_mb_per_rank", peaks).add_json("optimizer_state_mb_per_rank", states);
}

void RunLogger::add_mfu(MetricsRecord& r) {
  if (peak_flops_ == 0) find_peak_flops();
  const double achieved = step_flops_ * progress_->steps_per_s();
  if (achieved > peak_flops_) raise_peak_flops(achieved);
  const double mfu = achieved / peak_flops_;
  r.add("flops_per_step", step_flops_)
      .add("peak_flops", std::round(peak_flops_))
      .add("mfu", std::round(mfu * 1e4) / 1e4);
}

// the dtype of the run's matrix products: autocast's where it is on
DType RunLogger::peak_dtype() const { return run_.cfg.amp.enabled ? run_.amp_dtype() : run_.dtype(); }

void RunLogger::find_peak_flops() {
  const auto t0 = std::chrono::steady_clock::now();
  const DType t = peak_dtype();
  const std::string file = default_peaks_file();
  const MatmulPeak peak = matmul_peak(run_.device, t, file);
  peak_flops_ = peak.flops;
  progress_->exclude_from_window(std::chrono::steady_clock::now() - t0);
  progress_->message(str("MFU: ", json_num(step_flops_ / 1e9), " GFLOP per step on each rank (matrix products and ",
                         "convolutions, forward and backward) against a ", dtype_name(t), " matmul peak of ",
                         json_num(std::round(peak_flops_ / 1e8) / 10), " GFLOP/s on ", run_.device.str(),
                         peak.cached    ? str(" (measured once on this machine, kept in ", file, ")")
                         : file.empty() ? std::string(" (measured by this run)")
                                        : str(" (measured now, kept in ", file, " for later runs)")));
}

// A kept peak that this run outdoes was measured on a busy machine (the first run's, say, beside a
// build): measured again, once a run, and raised to at least this run's rate.
void RunLogger::raise_peak_flops(double achieved) {
  const auto t0 = std::chrono::steady_clock::now();
  const DType t = peak_dtype();
  const double old = peak_flops_;
  peak_flops_ = raise_matmul_peak(run_.device, t, default_peaks_file(), old, achieved, !peak_remeasured_);
  progress_->exclude_from_window(std::chrono::steady_clock::now() - t0);
  if (!peak_remeasured_)
    progress_->message(str("MFU: this run's ", json_num(std::round(achieved / 1e8) / 10), " GFLOP/s beat the ",
                           dtype_name(t), " matmul peak of ", json_num(std::round(old / 1e8) / 10),
                           " GFLOP/s; measured again: ", json_num(std::round(peak_flops_ / 1e8) / 10), " GFLOP/s"));
  peak_remeasured_ = true;
}

void RunLogger::eval_line(int64_t step, int64_t epoch, const EvalResult& e, const std::optional<EvalResult>& ema) {
  if (ema)
    progress_->eval(step, epoch, e.loss, e.accuracy, EvalScores{ema->loss, ema->accuracy});
  else
    progress_->eval(step, epoch, e.loss, e.accuracy);
  MetricsRecord r;
  r.add("split", "eval").add("step", step).add("epoch", epoch).add("loss", e.loss);
  if (e.accuracy) r.add("accuracy", *e.accuracy);
  if (ema) {
    r.add("ema_loss", ema->loss);
    if (ema->accuracy) r.add("ema_accuracy", *ema->accuracy);
  }
  write(r);
}

void RunLogger::histograms(int64_t step) {
  const int64_t every = run_.cfg.log.histograms_every;
  if (!tensorboard_ || every <= 0 || step % every != 0) return;
  for (const auto& [name, p] : run_.model.net->named_parameters()) {
    tensorboard_->add_histogram("weights/" + name, p.detach().to(kCPU).tolist(), step);
    if (p.grad().defined()) tensorboard_->add_histogram("grads/" + name, p.grad().to(kCPU).tolist(), step);
  }
}

void RunLogger::done(int64_t steps, double seconds, const EvalResult& e, const std::optional<EvalResult>& ema) {
  char startup[64] = "";
  if (startup_s_) std::snprintf(startup, sizeof startup, " (first step %.3f s after process start)", *startup_s_);
  char buf[300];
  int n = std::snprintf(buf, sizeof buf, "done: %lld steps in %.1f s%s; eval loss %.4f", (long long)steps, seconds,
                        startup, e.loss);
  if (e.accuracy && n > 0 && size_t(n) < sizeof buf)
    n += std::snprintf(buf + n, sizeof buf - size_t(n), ", accuracy %.4f", *e.accuracy);
  if (ema && n > 0 && size_t(n) < sizeof buf) {
    n += std::snprintf(buf + n, sizeof buf - size_t(n), "; EMA eval loss %.4f", ema->loss);
    if (ema->accuracy && size_t(n) < sizeof buf)
      std::snprintf(buf + n, sizeof buf - size_t(n), ", accuracy %.4f", *ema->accuracy);
  }
  progress_->message(buf);
}

}  // namespace tr::train
