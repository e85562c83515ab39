// RunLogger: what a run reports. It builds each train and eval record (train/metrics_record.h)
// from the loop's figures, the memory figures and MFU, and hands it to the sinks: metrics.jsonl
// ([log] jsonl), the TensorBoard event file ([log] tensorboard, rank 0) and the progress display.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "io/metrics_sink.h"
#include "io/tensorboard.h"
#include "train/checkpoint_state.h"
#include "train/eval_result.h"
#include "train/metrics_record.h"
#include "train/progress.h"
#include "train/run_setup.h"

namespace tr::train {

class RunLogger {
 public:
  explicit RunLogger(Run& run) : run_(run) {}
  RunLogger(const RunLogger&) = delete;
  RunLogger& operator=(const RunLogger&) = delete;

  // Opens the sinks (a resumed run's metrics.jsonl cut back to its checkpoint's lines, its event
  // file continued) and the progress display, which says what the run will do.
  void open(int64_t start_step, const std::optional<CheckpointState>& resumed);
  // Closes the files: before the closing message, so that a reader who sees it finds them whole.
  void close();
  Progress& progress() { return *progress_; }
  // Records written so far, those before a resume included (a checkpoint's metrics_lines).
  int64_t records() const { return metrics_ ? metrics_->records() : resumed_records_; }

  // This process's first step is starting: the time since process start is the next train line's startup_s.
  void first_step_starting();
  std::optional<double> startup_s() const { return startup_s_; }
  // MFU's numerator: the FLOPs of this process's first step (< 0 until it is counted).
  bool step_flops_counted() const { return step_flops_ >= 0; }
  void set_step_flops(double flops) { step_flops_ = flops; }

  // The train line of the progress window ending at `step` (on a log step), which closes the window.
  void train_line(int64_t step, int64_t epoch, const std::vector<double>& lrs, int64_t nonfinite_skipped);
  // An eval's line, with the EMA weights' scores beside the model's when the run keeps them.
  void eval_line(int64_t step, int64_t epoch, const EvalResult& e, const std::optional<EvalResult>& ema);
  // [log] histograms_every: each parameter's values and gradient as TensorBoard histograms, when due.
  void histograms(int64_t step);
  // The closing message of a run that was not stopped.
  void done(int64_t steps, double seconds, const EvalResult& e, const std::optional<EvalResult>& ema);

 private:
  void write(const MetricsRecord& r);
  // The memory figures and MFU of a train line.
  void add_memory(MetricsRecord& r);
  void add_mfu(MetricsRecord& r);
  // The matmul peak MFU divides by, found on the first train line that reports MFU (outside the timed window).
  void find_peak_flops();
  void raise_peak_flops(double achieved);
  DType peak_dtype() const;

  Run& run_;
  std::unique_ptr<io::MetricsSink> metrics_;        // metrics.jsonl ([log] jsonl)
  std::unique_ptr<io::SummaryWriter> tensorboard_;  // the event file ([log] tensorboard), rank 0
  int64_t resumed_records_ = 0;                     // the checkpoint's metrics_lines, without a sink
  std::unique_ptr<Progress> progress_;
  // Seconds from process start to the start of this process's first optimizer step (its batch in
  // hand): written once, as startup_s of the next train line.
  std::optional<double> startup_s_;
  bool startup_logged_ = false;
  double step_flops_ = -1;        // FLOPs of this process's first step (< 0: not counted yet)
  double peak_flops_ = 0;         // the matmul FLOP/s MFU divides by (0: not found yet)
  bool peak_remeasured_ = false;  // a peak this run outdid was measured again (once a run)
};

}  // namespace tr::train
