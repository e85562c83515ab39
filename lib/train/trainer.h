// Trainer: builds the model, data and optimizer of a run config and runs the training loop:
// steps, evaluation, metrics.jsonl, the progress line, and the final weights.
#pragma once
#include <memory>
#include <string>
#include "config/run_config.h"
#include "data/dataloader.h"
#include "nn/model_file.h"
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

 private:
  // loss and the number of correct predictions for one batch
  std::pair<Tensor, Tensor> loss_and_correct(const Tensor& logits, const Tensor& target) const;
  void log_line(const std::string& json);

  config::RunConfig cfg_;
  Device device_;
  nn::Model model_;
  std::shared_ptr<const data::Dataset> train_set_, eval_set_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::FILE* metrics_ = nullptr;
};

}  // namespace tr::train
