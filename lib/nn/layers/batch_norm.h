// BatchNorm1d / BatchNorm2d: normalisation by per-channel batch statistics in training, by running
// statistics in eval (torch.nn.BatchNorm1d / BatchNorm2d; _BatchNorm is their common base).
#pragma once
#include <optional>
#include "nn/module.h"

namespace tr::nn {

class MaxPool2d;

class BatchNorm : public Module {
 public:
  // momentum nullopt = cumulative moving average (torch's momentum=None).
  // Parameters weight = 1, bias = 0 (affine); buffers running_mean = 0, running_var = 1,
  // num_batches_tracked = 0 (int64 scalar) when track_running_stats.
  BatchNorm(std::string type_name, int64_t num_features, double eps, std::optional<double> momentum, bool affine,
            bool track_running_stats);
  // y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias per channel (dim 1). Training (or no running
  // stats): E, Var over all dims but 1 (biased Var), and under no_grad
  //   running = (1 - m) running + m batch   (running_var takes the unbiased Var; m = 1/num_batches_tracked
  //   when momentum is nullopt). Eval: the running statistics.
  Tensor forward(const Tensor& x) override;
  // pool(relu(forward(x))) for an [N, C, H, W] input, one fused op in training
  // (batch_norm_relu_max_pool2d): what Sequential runs for BatchNorm2d, ReLU, MaxPool2d in a row.
  Tensor forward_relu_max_pool(const Tensor& x, MaxPool2d& pool);
  std::string extra_repr() const override;
  void reset_running_stats();

  int64_t num_features;
  double eps;
  std::optional<double> momentum;
  bool affine, track_running_stats;
  Tensor weight, bias;                                    // [C]
  Tensor running_mean, running_var, num_batches_tracked;  // [C], [C], [] int64

 protected:
  virtual void check_input(const Tensor& x) const = 0;

 private:
  bool check_forward_input(const Tensor& x) const;
  // forward's math on a checked input
  Tensor normalize(const Tensor& x, bool batch_stats);
  void update_running_stats(const Tensor& x, const Tensor& mean, const Tensor& var);
};

class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm("BatchNorm1d", num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input(const Tensor& x) const override;  // [N, C] or [N, C, L]
};

class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm("BatchNorm2d", num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input(const Tensor& x) const override;  // [N, C, H, W]
};

}  // namespace tr::nn
