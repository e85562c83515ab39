// Trainer: builds the model, data, optimizer and LR scheduler of a run config (every config error
// surfaces here, before the first step) and runs the training loop: gradient accumulation,
// clipping, optimizer and scheduler steps, evaluation, metrics.jsonl, progress, final weights.
#pragma once
#include <memory>
#include <string>
#include "config/run_config.h"
#include "data/dataloader.h"
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
};

class Trainer {
 public:
  explicit Trainer(config::RunConfig cfg);
  FitResult fit();
  EvalResult evaluate();
  // Loads weights written by a run (model.safetensors) into the model.
  void load_weights(const std::string& path);
  nn::Model& model() { return model_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  optim::LRScheduler* scheduler() { return scheduler_.get(); }
  int64_t total_steps() const { return total_steps_; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }

 private:
  // loss and the number of correct predictions for one batch
  std::pair<Tensor, Tensor> loss_and_correct(const Tensor& logits, const Tensor& target) const;
  void log_line(const std::string& json);
  // One optimizer step over `accumulate` micro-batches; returns the step's loss (the mean over
  // all its samples) and the total gradient norm before clipping (-1 without norm clipping).
  std::pair<double, double> train_step(const std::vector<data::Batch>& micro);

  config::RunConfig cfg_;
  Device device_;
  nn::Model model_;
  std::shared_ptr<const data::Dataset> train_set_, eval_set_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LRScheduler> scheduler_;
  std::unique_ptr<data::DataLoader> loader_;
  int64_t steps_per_epoch_ = 0, total_steps_ = 0;
  std::FILE* metrics_ = nullptr;
};

}  // namespace tr::train
