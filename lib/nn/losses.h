// Loss functions as torch.nn's loss modules and their functional forms: CrossEntropyLoss, MSELoss,
// BCEWithLogitsLoss. reduction is "mean" | "sum" | "none" everywhere.
#pragma once
#include <string>
#include "nn/module.h"

namespace tr::nn {

// ---- functional forms (torch.nn.functional) ----

// Logits [N, C] (or [C], or [N, C, d1, ...] with the classes in dim 1) against
//  - class indices (integer) of shape [N] ([] / [N, d1, ...]): loss_i = (1-ls) (-log p_i[t_i])
//    + ls/C * sum_c (-log p_i[c]); targets equal to ignore_index contribute 0, and "mean" divides by
//    the number of targets that are not ignored (nan when all are);
//  - probabilities (floating, the input's shape): loss_i = -sum_c ((1-ls) y_ic + ls/C) log p_ic,
//    "mean" over the N*d1*... rows (ignore_index does not apply).
// For a GPT, pass logits [B*T, V] and targets [B*T]. Out-of-range class indices are an error.
Tensor cross_entropy_loss(const Tensor& input, const Tensor& target, int64_t ignore_index = -100,
                          double label_smoothing = 0.0, const std::string& reduction = "mean");
// (x - y)^2, same shapes. The reduction has no default so that an unqualified two-argument call
// stays tr::mse_loss (the core's mean form) without ambiguity.
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction);
// Numerically stable -[pw y log s(x) + (1-y) log(1-s(x))], s = sigmoid, computed as torch does:
// (1-y) x + lw (m + log(exp(-m) + exp(-x-m))), m = max(-x, 0), lw = 1 + (pw - 1) y (1 without pos_weight).
// pos_weight broadcasts against the input (one weight per class in the last dim).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                                        const Tensor& pos_weight = Tensor());

// ---- modules: forward({input, target}) or loss(input, target) ----

class Loss : public Module {
 public:
  using Module::operator();
  using Module::forward;
  Tensor operator()(const Tensor& input, const Tensor& target) { return Module::operator()(std::vector<Tensor>{input, target}); }
  Tensor forward(const std::vector<Tensor>& xs) override;
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  std::string reduction;

 protected:
  Loss(std::string type_name, std::string reduction);
};

class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(int64_t ignore_index = -100, double label_smoothing = 0.0, std::string reduction = "mean");
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string extra_repr() const override;
  int64_t ignore_index;
  double label_smoothing;
};

class MSELoss : public Loss {
 public:
  explicit MSELoss(std::string reduction = "mean");
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
};

class BCEWithLogitsLoss : public Loss {
 public:
  // pos_weight (optional) is registered as the buffer "pos_weight", as in torch.
  explicit BCEWithLogitsLoss(std::string reduction = "mean", Tensor pos_weight = Tensor());
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  Tensor pos_weight;
};

}  // namespace tr::nn
