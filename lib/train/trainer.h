// Trainer: runs the training loop over the parts of a run (train/run_setup.h builds them from the
// config): gradient accumulation, clipping, optimizer and scheduler steps, evaluation, and when
// to log, evaluate, checkpoint and stop. What it reports goes through its RunLogger
// (train/run_logger.h), its checkpoints through its Checkpointer (train/checkpointer.h), and a
// step that turns non-finite to the forensics of train/nonfinite_forensics.h.
#pragma once
#include <nlohmann/json.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "config/run_config.h"
#include "core/rng.h"
#include "io/run_lock.h"
#include "train/checkpoint_state.h"
#include "train/checkpointer.h"
#include "train/eval_result.h"
#include "train/run_logger.h"
#include "train/run_setup.h"
#include "train/stop_signal.h"

namespace tr::train {

struct FitResult {
  int64_t steps = 0;
  EvalResult last_eval;
  std::optional<EvalResult> last_ema_eval;  // the EMA weights' ([train] ema_decay > 0)
  double seconds = 0;
  int stopped_by_signal = 0;     // SIGINT / SIGTERM: a checkpoint was written and the run stopped early
  bool stopped_at_step = false;  // stop_at_step: the same, on request
};

// What train_step did.
struct StepResult {
  Tensor loss;              // this rank's part of the step's mean loss: f64, 0-dim, on the run's device
  Tensor grad_norm;         // before clipping, 0-dim on the run's device; undefined without norm clipping
                            // (or when the step overflowed)
  bool stepped = true;      // false: the GradScaler skipped the optimizer step (inf/NaN gradients), or [train]
                            // nonfinite = "skip" did
  std::vector<double> lrs;  // the lr of each param group this step used (before the scheduler stepped)
};

class Trainer {
 public:
  // Sets the run up (every config error surfaces here, before the first step).
  explicit Trainer(config::RunConfig cfg) : run_(std::move(cfg)), logger_(run_), checkpointer_(run_) {}
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;
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
    bool saved_last = false;                   // the newest checkpoint is at the current step
    std::chrono::steady_clock::time_point t0;  // when training began (FitResult::seconds)
    FitResult result;
  };

  // ---- fit(), in order ----
  void prepare_run_dir();
  void write_resolved_config();
  // The steps of one epoch; false when the run stops (signal or stop_at_step) inside it.
  bool train_epoch(Loop& l, StopSignal& stop);
  // The micro-batches of the next optimizer step (fewer at the end of an epoch; none after it).
  bool next_micro_batches(std::vector<data::Batch>& micro);
  // Logging, mid-epoch eval and checkpoints after a step; false when the run stops here.
  bool after_step(Loop& l, const std::vector<data::Batch>& micro, const StepResult& sr, StopSignal& stop);
  // The checkpoint of a stop (signal or stop_at_step) and its message.
  void stop_here(Loop& l, int signal);
  // Eval, the epoch's scheduler step and checkpoint; false when the step budget ended inside the epoch.
  bool end_epoch(Loop& l);
  // The final checkpoint and weights, the closing message.
  void finish(Loop& l);

  // One optimizer step over `accumulate` micro-batches, the forward under autocast and the
  // backward through the GradScaler when [amp] asks for them.
  StepResult train_step(const std::vector<data::Batch>& micro);
  // [train] nonfinite before the step is applied: true when the step is skipped ("skip"); throws
  // the forensics' report ("stop").
  bool skip_nonfinite_step(const std::vector<data::Batch>& micro, int64_t global, const GeneratorState& rng_at_start,
                           StepResult& res);
  // [train] grad_clip: the gradients clipped, and res.grad_norm set when clipping by norm.
  void clip_gradients(StepResult& res);
  // The forward and backward of the micro-batches (their loss part, the gradients accumulated).
  // local: no DDP allreduce (the nonfinite re-run, which other ranks do not join); *in_backward
  // says, while it runs, whether a backward is under way.
  Tensor forward_backward(const std::vector<data::Batch>& micro, int64_t global, bool local = false,
                          bool* in_backward = nullptr);
  void eval_and_log(Loop& l);
  // The EMA weights on the eval set (every rank scores rank 0's buffers).
  EvalResult evaluate_ema();
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
  // A checkpoint of `pos`, the pending steps counted in the progress window it saves.
  void save_checkpoint(const TrainPosition& pos);

  Run run_;
  std::string resume_;
  int64_t stop_at_step_ = 0;
  std::unique_ptr<io::RunLock> lock_;  // rank 0: runs/<name>/.lock while it trains
  RunLogger logger_;
  std::vector<PendingStep> pending_;
  std::chrono::steady_clock::time_point last_flush_ = std::chrono::steady_clock::now();
  int64_t nonfinite_skipped_ = 0;    // [train] nonfinite = "skip": steps not applied (checkpointed)
  std::vector<Tensor> cast_params_;  // what autocast cast in the last forward (amp::precast_parameters)
  int64_t next_step_ = 1;            // the optimizer step train_step is running (for messages)
  // Last: destroyed first, it waits for a background checkpoint write in flight (on an error that
  // leaves fit(), the checkpoint it writes still completes, the run's lock still held).
  Checkpointer checkpointer_;
};

}  // namespace tr::train
