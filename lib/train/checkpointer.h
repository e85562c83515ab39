// Checkpointer: a run's checkpoints (the layout docs/config.md's [checkpoint] gives): writes them,
// synchronously or in the background ([checkpoint] async), keeps the best eval's ([checkpoint]
// keep_best), writes the final weights, and restores a run from one (--resume).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include "io/async_writer.h"
#include "optim/optimizer_state.h"
#include "train/checkpoint_snapshot.h"
#include "train/checkpoint_staging.h"
#include "train/checkpoint_state.h"
#include "train/eval_result.h"
#include "train/progress.h"
#include "train/run_setup.h"

namespace tr::train {

// Where a run stands between two optimizer steps: what a checkpoint must restore besides the
// model, optimizer and scheduler.
struct TrainPosition {
  int64_t step = 0;   // optimizer steps done
  int64_t epoch = 0;  // the loader's epoch ...
  int64_t batch = 0;  // ... and the micro-batches of it already consumed
};

// What a checkpoint saves of the loop's own counters, so that the resumed run logs as the
// uninterrupted one does.
struct LoopCounters {
  ProgressWindow progress_window;  // the sums of the steps since the last train line
  int64_t metrics_lines = 0;       // records written to metrics.jsonl
  int64_t nonfinite_skipped = 0;   // [train] nonfinite = "skip": steps not applied
};

// Where the first sample of micro-batch `batch` of `epoch` lies in the training files
// (Dataset::locate): a checkpoint's data_position; null when the dataset does not say or the epoch
// has no such batch.
nlohmann::json data_position(const data::DataLoader& loader, int64_t epoch, int64_t batch);

class Checkpointer {
 public:
  explicit Checkpointer(Run& run) : run_(run) {}
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // runs/<name>/checkpoints
  std::string root() const { return run_.cfg.run_dir() + "/checkpoints"; }
  // The checkpoint `spec` names restored into the run's parts (model, optimizer, scheduler, EMA,
  // scaler, RNG) and its state returned: "auto" (the newest valid checkpoint of this run; none yet:
  // nothing) or a checkpoint directory; "" restores nothing.
  std::optional<CheckpointState> resume(const std::string& spec);

  // keep_best: the eval the next checkpoint holds, when it is the best so far.
  void evaluated(const EvalResult& e);
  // Writes checkpoints/step_<N>/ for `pos` (every rank calls it; rank 0 writes, then all meet at a
  // barrier). With [checkpoint] async, rank 0 copies the state and a background thread writes it:
  // the ranks go on at once, and meet where the run stops (wait).
  void save(const TrainPosition& pos, const LoopCounters& counters);
  // A background write that has ended: its failure is reported now (a step finds it).
  void poll() { collect_write(false); }
  // Where the run stops or ends: the background write completes (rank 0), then the ranks meet.
  void wait();
  // checkpoints/final/model.safetensors: the weights alone, through the checkpoint writer (rank 0).
  void write_final_weights(int64_t step);

 private:
  // A checkpoint's write, from its snapshot to its outcome: its name, and the keep_best record
  // (the best value and the checkpoint holding it) that holds once it is committed.
  struct InFlight {
    std::string name;
    std::optional<double> best_value;
    std::string best_name;
  };
  // keep_best: the value this checkpoint holds the best of (none: it holds no new best).
  std::optional<double> new_best();
  // rank 0's part of save(): the snapshot, written now or handed to the background writer.
  void write(const TrainPosition& pos, const LoopCounters& counters, const InFlight& done,
             const optim::OptimizerState& os);
  // What the checkpoint of `pos` holds, taken now (the tensors still the live ones).
  CheckpointSnapshot snapshot(const TrainPosition& pos, const LoopCounters& counters, const InFlight& best,
                              const optim::OptimizerState& os);
  // The background write's outcome once it is done (block: waits for it): its keep_best record
  // adopted, or its failure reported as a synchronous one's (guard_write).
  void collect_write(bool block);
  // Runs a checkpoint write; a failure becomes io::CheckpointWriteError naming the checkpoint, the
  // cause and the newest intact one, or (on_error = "warn") a warning.
  void guard_write(const std::string& name, const std::function<void()>& write);

  // ---- resume (checkpoint_restore.cpp) ----
  // The checkpoint directory `spec` names, or none (auto with no checkpoint yet).
  std::optional<std::string> resume_dir(const std::string& spec) const;
  CheckpointState restore(const std::string& dir);
  // Refuses a config that differs from the checkpoint's in keys that change the run.
  void check_config(const std::string& dir, const CheckpointState& state);
  void restore_model_and_optimizer(const std::string& dir, const CheckpointState& state);
  void restore_ema_and_scaler(const std::string& dir, const CheckpointState& state);
  // Refuses data that differs from the checkpoint's, or that would continue at another sample.
  void check_data(const std::string& dir, const CheckpointState& state);

  Run& run_;
  std::optional<double> best_metric_;  // [checkpoint] keep_best: the best value so far ...
  std::string best_checkpoint_;        // ... and the checkpoint holding it
  EvalResult last_eval_;
  bool evaluated_since_checkpoint_ = false;
  CheckpointStaging staging_;          // [checkpoint] async: the host copies of the state being written
  std::optional<InFlight> in_flight_;  // the background write not yet collected
  // The background writer, last: destroyed first, it waits for the write in flight (on an error
  // that leaves fit(), the checkpoint it writes still completes).
  std::unique_ptr<io::AsyncWriter> writer_;
};

}  // namespace tr::train
