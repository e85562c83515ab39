// Trainer: runs the training loop over the parts of a run (train/run_setup.h builds them from the
// config): gradient accumulation, clipping, optimizer and scheduler steps, evaluation, metrics
// sinks, progress, checkpoint cadence, signals, the final weights.
#pragma once
#include <nlohmann/json.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "config/run_config.h"
#include "io/async_writer.h"
#include "io/metrics_sink.h"
#include "io/run_lock.h"
#include "io/tensorboard.h"
#include "optim/optimizer_state.h"
#include "train/checkpoint_snapshot.h"
#include "train/checkpoint_staging.h"
#include "train/checkpoint_state.h"
#include "train/progress.h"
#include "train/run_setup.h"
#include "train/stop_signal.h"

namespace tr::train {

struct EvalResult {
  double loss = 0;
  std::optional<double> accuracy;  // for a classification loss
  int64_t count = 0;  // predictions scored (samples, or tokens for a language model)
};

struct FitResult {
  int64_t steps = 0;
  EvalResult last_eval;
  std::optional<EvalResult> last_ema_eval;  // the EMA weights' ([train] ema_decay > 0)
  double seconds = 0;
  int stopped_by_signal = 0;  // SIGINT / SIGTERM: a checkpoint was written and the run stopped early
  bool stopped_at_step = false;  // stop_at_step: the same, on request
};

// What train_step did.
struct StepResult {
  Tensor loss;            // this rank's part of the step's mean loss: f64, 0-dim, on the run's device
  Tensor grad_norm;       // before clipping, 0-dim on the run's device; undefined without norm clipping
                          // (or when the step overflowed)
  bool stepped = true;    // false: the GradScaler skipped the optimizer step (inf/NaN gradients), or [train]
                          // nonfinite = "skip" did
  std::vector<double> lrs;  // the lr of each param group this step used (before the scheduler stepped)
};

// Where a run stands between two optimizer steps: what a checkpoint must restore besides the
// model, optimizer and scheduler.
struct TrainPosition {
  int64_t step = 0;   // optimizer steps done
  int64_t epoch = 0;  // the loader's epoch ...
  int64_t batch = 0;  // ... and the micro-batches of it already consumed
};

class Trainer {
 public:
  // Sets the run up (every config error surfaces here, before the first step).
  explicit Trainer(config::RunConfig cfg) : run_(std::move(cfg)) {}
  // Resumes from a checkpoint before training: "auto" (the newest valid checkpoint of this run, if
  // any) or a checkpoint directory. Call before fit().
  void resume_from(std::string spec) { resume_ = std::move(spec); }
  // Stops after optimizer step `step` with a checkpoint, as if interrupted there (the schedule still
  // spans the whole run): training in chunks, and the exact-resume tests.
  void stop_at_step(int64_t step) { stop_at_step_ = step; }
  FitResult fit();
  // The model on the eval set; the overload scores another module of the run (the EMA weights).
  EvalResult evaluate();
  EvalResult evaluate(nn::Module& net);
  // Loads weights written by a run (model.safetensors) into the model.
  void load_weights(const std::string& path);
  const Run& run() const { return run_; }

 private:
  // The loop's state during fit().
  struct Loop {
    TrainPosition start;  // where fit() began: a resumed checkpoint's position, or zero
    int64_t step = 0, epoch = 0;
    bool saved_last = false;  // the newest checkpoint is at the current step
    std::chrono::steady_clock::time_point t0;  // when training began (FitResult::seconds)
    FitResult result;
  };

  // ---- fit(), in order ----
  void prepare_run_dir();
  // The state of the checkpoint resume_from() names, restored; none when training from scratch.
  std::optional<CheckpointState> restore_if_asked();
  void write_resolved_config();
  void open_metrics(const std::optional<CheckpointState>& resumed);
  void open_progress(const TrainPosition& start, const std::optional<CheckpointState>& resumed);
  // The steps of one epoch; false when the run stops (signal or stop_at_step) inside it.
  bool train_epoch(Loop& l, StopSignal& stop);
  // The micro-batches of the next optimizer step (fewer at the end of an epoch; none after it).
  bool next_micro_batches(std::vector<data::Batch>& micro);
  // Logging, mid-epoch eval and checkpoints after a step; false when the run stops here.
  bool after_step(Loop& l, const std::vector<data::Batch>& micro, const StepResult& sr, StopSignal& stop);
  // Eval, the epoch's scheduler step and checkpoint; false when the step budget ended inside the epoch.
  bool end_epoch(Loop& l);
  // The final checkpoint and weights, the closing message.
  void finish(Loop& l);

  // One optimizer step over `accumulate` micro-batches, the forward under autocast and the
  // backward through the GradScaler when [amp] asks for them.
  StepResult train_step(const std::vector<data::Batch>& micro);
  // The forward and backward of the micro-batches (their loss part, the gradients accumulated).
  // local: no DDP allreduce (the nonfinite re-run, which other ranks do not join); *in_backward
  // says, while it runs, whether a backward is under way.
  Tensor forward_backward(const std::vector<data::Batch>& micro, int64_t global, bool local = false,
                          bool* in_backward = nullptr);
  // [train] nonfinite before the optimizer step: what is non-finite ("" when nothing is): this
  // process's loss (single process: with ranks, each has only its part) and the gradients.
  std::string nonfinite_in_step(const Tensor& loss_part);
  // nonfinite = "stop": re-runs the step from its starting random state with NonFiniteOpCheck on
  // and hooks naming the layer, saves the batch's indices, and throws the report.
  [[noreturn]] void stop_nonfinite(const std::vector<data::Batch>& micro, int64_t global, const std::string& what,
                                   const GeneratorState& rng_at_start);
  void eval_and_log(Loop& l);
  void log_record(const std::string& json);
  // [log] histograms_every: each parameter's values and gradient as TensorBoard histograms
  void log_histograms(int64_t step);
  // Sums `values` over the ranks (a no-op in a single process); `what` names the collective.
  void allreduce_sum(std::vector<double>& values, const char* what);
  // The steps whose losses are still on the device: read back together at log points, evals,
  // checkpoints and stops (every step on the CPU), so a GPU step never waits for the host.
  struct PendingStep {
    int64_t step, epoch;
    Tensor loss;  // StepResult::loss
    int64_t samples;
    Tensor grad_norm;  // StepResult::grad_norm, read back with the loss
  };
  // Reads the pending losses back (one copy), sums them and this rank's signal over the ranks,
  // checks them and feeds them to the progress window in order; returns the agreed signal.
  int flush_steps(int local_signal);
  // The signal every rank agrees on (one collective when there are ranks).
  int agree_signal(int local_signal);
  // ,"flops_per_step":..,"peak_flops":..,"mfu":.. for a train line (train/mfu.h); measures the peak
  // on its first call.
  std::string mfu_fields();
  // ,"mem_peak_mb":..,"mem_reserved_mb":..,"mem_peak_reserved_mb":..,"optimizer_state_mb":.. (this
  // rank's peak memory since the last line, what its allocator reserves now and at most since the
  // last line, and its optimizer state) and, with ranks, every rank's peak memory
  // and optimizer state: "mem_peak_mb_per_rank":[..],"optimizer_state_mb_per_rank":[..] (one
  // collective, on log lines, which every rank reaches alike)
  std::string memory_fields();

  // ---- checkpoints (trainer_checkpoint.cpp) ----
  std::string checkpoint_root() const { return run_.cfg.run_dir() + "/checkpoints"; }
  // Writes runs/<name>/checkpoints/step_<N>/ for `pos` (every rank calls it; rank 0 writes, then
  // all meet at a barrier). With [checkpoint] async, rank 0 copies the state and a background
  // thread writes it: the ranks go on at once, and meet where the run stops (wait_for_checkpoint).
  void save_checkpoint(const TrainPosition& pos);
  // A checkpoint's write, from its snapshot to its outcome: its name, and the keep_best record
  // (the best value and the checkpoint holding it) that holds once it is committed.
  struct CheckpointInFlight {
    std::string name;
    std::optional<double> best_value;
    std::string best_name;
  };
  // What the checkpoint of `pos` holds, taken now (the tensors still the live ones).
  CheckpointSnapshot checkpoint_snapshot(const std::string& name, const TrainPosition& pos, const CheckpointInFlight& best,
                                         const optim::OptimizerState& os);
  // The background write's outcome once it is done (block: waits for it): its keep_best record
  // adopted, or its failure reported as a synchronous one's (guard_checkpoint_write).
  void collect_checkpoint_write(bool block);
  // Where the run stops or ends: the background write completes (rank 0), then the ranks meet.
  void wait_for_checkpoint();
  // checkpoints/final/model.safetensors: the weights alone, through the checkpoint writer.
  void write_final_weights(int64_t step);
  // Restores model, optimizer, scheduler and RNG from `dir`; returns its state.json.
  CheckpointState restore_checkpoint(const std::string& dir);
  // Runs a checkpoint write; a failure becomes io::CheckpointWriteError naming the checkpoint, the
  // cause and the newest intact one, or (on_error = "warn") a warning.
  void guard_checkpoint_write(const std::string& name, const std::function<void()>& write);
  // The checkpoint directory `resume_` names, or none (auto with no checkpoint yet).
  std::optional<std::string> resume_dir() const;
  // Records written to the metrics sink so far (a checkpoint's metrics_lines).
  int64_t metrics_records() const { return metrics_ ? metrics_->records() : resumed_records_; }

  Run run_;
  std::string resume_;
  int64_t stop_at_step_ = 0;
  std::unique_ptr<io::RunLock> lock_;         // rank 0: runs/<name>/.lock while it trains
  std::unique_ptr<io::MetricsSink> metrics_;  // metrics.jsonl ([log] jsonl)
  std::unique_ptr<io::SummaryWriter> tensorboard_;  // the event file ([log] tensorboard), rank 0
  int64_t resumed_records_ = 0;               // the checkpoint's metrics_lines, without a sink
  std::unique_ptr<Progress> progress_;
  std::vector<PendingStep> pending_;
  std::chrono::steady_clock::time_point last_flush_ = std::chrono::steady_clock::now();
  EvalResult last_eval_;
  bool evaluated_since_checkpoint_ = false;
  // Seconds from process start to the start of this process's first optimizer step (its batch in
  // hand): written once, as startup_s of the next train line.
  std::optional<double> startup_s_;
  bool startup_logged_ = false;
  std::optional<double> best_metric_;  // [checkpoint] keep_best: the best value so far ...
  std::string best_checkpoint_;        // ... and the checkpoint holding it
  int64_t nonfinite_skipped_ = 0;      // [train] nonfinite = "skip": steps not applied (checkpointed)
  std::vector<Tensor> cast_params_;  // what autocast cast in the last forward (amp::precast_parameters)
  int64_t next_step_ = 1;              // the optimizer step train_step is running (for messages)
  double step_flops_ = -1;             // FLOPs of this process's first step (< 0: not counted yet)
  double peak_flops_ = 0;              // measured matmul FLOP/s (0: not measured yet)
  CheckpointStaging staging_;          // [checkpoint] async: the host copies of the state being written
  std::optional<CheckpointInFlight> in_flight_;  // the background write not yet collected
  // The background writer, last: destroyed first, it waits for the write in flight (on an error
  // that leaves fit(), the checkpoint it writes still completes).
  std::unique_ptr<io::AsyncWriter> writer_;
};

}  // namespace tr::train
