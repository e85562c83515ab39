// Trainer: builds the model, data, optimizer and LR scheduler of a run config (every config error
// surfaces here, before the first step) and runs the training loop: gradient accumulation,
// clipping, optimizer and scheduler steps, evaluation, metrics.jsonl, progress, final weights.
#pragma once
#include <nlohmann/json.hpp>
#include <memory>
#include <optional>
#include <string>
#include "amp/grad_scaler.h"
#include "config/run_config.h"
#include "data/dataloader.h"
#include "distributed/ddp.h"
#include "distributed/env.h"
#include "distributed/process_group.h"
#include "distributed/tcp_store.h"
#include "nn/model_file.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

namespace tr::train {

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
  int64_t count = 0;  // predictions scored (samples, or tokens for a language model)
};

struct FitResult {
  int64_t steps = 0;
  EvalResult last_eval;
  double seconds = 0;
  int stopped_by_signal = 0;  // SIGINT / SIGTERM: a checkpoint was written and the run stopped early
  bool stopped_at_step = false;  // stop_at_step: the same, on request
};

// Where a run stands between two optimizer steps: what a checkpoint must restore besides the
// model, optimizer and scheduler.
// What train_step did.
struct StepResult {
  double loss = 0;        // this rank's part of the step's mean loss
  double grad_norm = -1;  // before clipping; -1 without norm clipping (or when the step overflowed)
  bool stepped = true;    // false: the GradScaler skipped the optimizer step (inf/NaN gradients)
};

struct TrainPosition {
  int64_t step = 0;   // optimizer steps done
  int64_t epoch = 0;  // the loader's epoch ...
  int64_t batch = 0;  // ... and the micro-batches of it already consumed
};

class Trainer {
 public:
  explicit Trainer(config::RunConfig cfg);
  // Resumes from a checkpoint before training: "auto" (the newest valid checkpoint of this run, if
  // any) or a checkpoint directory. Call before fit().
  void resume_from(std::string spec) { resume_ = std::move(spec); }
  // Stops after optimizer step `step` with a checkpoint, as if interrupted there (the schedule still
  // spans the whole run): training in chunks, and the exact-resume tests.
  void stop_at_step(int64_t step) { stop_at_step_ = step; }
  FitResult fit();
  EvalResult evaluate();
  // Loads weights written by a run (model.safetensors) into the model.
  void load_weights(const std::string& path);
  nn::Model& model() { return model_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  optim::LRScheduler* scheduler() { return scheduler_.get(); }
  int64_t total_steps() const { return total_steps_; }
  // Rank 0 of a data-parallel run (or the only process) writes metrics, logs and checkpoints.
  bool is_main() const { return env_.rank == 0; }
  const distributed::DistEnv& dist_env() const { return env_; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }

 private:
  // loss and the number of correct predictions for one batch
  std::pair<Tensor, Tensor> loss_and_correct(const Tensor& logits, const Tensor& target) const;
  void log_line(const std::string& json);
  // One optimizer step over `accumulate` micro-batches, the forward under autocast and the
  // backward through the GradScaler when [amp] asks for them.
  StepResult train_step(const std::vector<data::Batch>& micro);
  std::string checkpoint_root() const { return cfg_.run_dir() + "/checkpoints"; }
  // Writes runs/<name>/checkpoints/step_<N>/ for `pos`; `window` is the progress window's state.
  // (every rank calls it; rank 0 writes, then all meet at a barrier)
  void save_checkpoint(const TrainPosition& pos, const nlohmann::json& window);
  void write_checkpoint(const std::string& name, const TrainPosition& pos, const nlohmann::json& window, bool is_best);
  // Restores model, optimizer, scheduler and RNG from `dir`; returns its state.json.
  nlohmann::json restore_checkpoint(const std::string& dir);
  // The checkpoint directory `resume_` names, or none (auto with no checkpoint yet).
  std::optional<std::string> resume_dir() const;

  DType amp_dtype() const;  // [amp] dtype
  // Joins the process group of a data-parallel run and wraps the model in DDP.
  void init_distributed();
  // Sums `values` over the ranks (a no-op in a single process).
  void allreduce_sum(std::vector<double>& values);

  config::RunConfig cfg_;
  distributed::DistEnv env_;
  std::unique_ptr<distributed::TCPStoreServer> store_server_;  // hand-started ranks: rank 0 hosts the store
  std::unique_ptr<distributed::Store> store_;
  std::unique_ptr<distributed::ProcessGroup> pg_;
  std::unique_ptr<distributed::DistributedDataParallel> ddp_;
  Device device_;
  nn::Model model_;
  std::shared_ptr<const data::Dataset> train_set_, eval_set_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LRScheduler> scheduler_;
  amp::GradScaler scaler_{amp::GradScalerOptions{.enabled = false}};
  std::unique_ptr<data::DataLoader> loader_;
  int64_t steps_per_epoch_ = 0, total_steps_ = 0;
  std::FILE* metrics_ = nullptr;
  int64_t metrics_lines_ = 0;  // lines written to metrics.jsonl (a resume truncates it to a checkpoint's count)
  std::string resume_;
  int64_t stop_at_step_ = 0;
  EvalResult last_eval_;
  bool evaluated_since_checkpoint_ = false;
  std::optional<double> best_metric_;  // [checkpoint] keep_best: the best value so far ...
  std::string best_checkpoint_;        // ... and the checkpoint holding it
};

}  // namespace tr::train
