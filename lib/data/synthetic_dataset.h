// SyntheticDataset: seeded Gaussian-blob classification data of any input shape, for tests,
// benchmarks and smoke runs without files.
#pragma once
#include <cstdint>
#include <string>
#include "data/dataset.h"

namespace tr::data {

// Class k has a centre c_k = separation * N(0, I) over the D = numel(input_shape) features;
// example i has label y_i ~ Uniform{0..K-1} and input x_i = c_{y_i} + noise * N(0, I).
// Every number is a pure function of (seed, i) through Philox (centres, labels and noise use
// disjoint counter ranges), so the data is the same on every run, thread count and machine.
class SyntheticDataset : public Dataset {
 public:
  struct Options {
    Shape input_shape = {1, 28, 28};
    int64_t num_classes = 10;
    int64_t size = 1024;
    uint64_t seed = 0;
    double separation = 1.0;  // scale of the class centres
    double noise = 1.0;       // std of the per-example noise
  };

  explicit SyntheticDataset(Options opts);

  int64_t size() const override { return opts_.size; }
  // input: f32 input_shape; target: i64 scalar.
  Example get(int64_t i) const override;
  // input: f32 [B, input_shape...]; target: i64 [B].
  Example get_batch(const std::vector<int64_t>& idx) const override;
  std::string describe() const override;

  int64_t num_classes() const { return opts_.num_classes; }
  const Tensor& inputs() const { return inputs_; }    // f32 [N, input_shape...], contiguous
  const Tensor& targets() const { return targets_; }  // i64 [N]
  const Tensor& centers() const { return centers_; }  // f32 [K, D]

 private:
  Options opts_;
  Tensor centers_, inputs_, targets_;
};

}  // namespace tr::data
