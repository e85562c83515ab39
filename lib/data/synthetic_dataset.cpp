// Gaussian blobs from Philox streams, generated once into contiguous tensors; the registration as
// the dataset "synthetic".
// philox.h first: its unqualified log/sqrt/cos must not see tr::log(Tensor) etc. from ops.h.
#include "core/philox.h"
#include "data/synthetic_dataset.h"
#include "data/dataset_registry.h"
#include "data/dataset_storage.h"
#include <algorithm>
#include <cstring>

namespace tr::data {

namespace {
// Disjoint Philox counter ranges (in 4-value blocks) of the one key `seed`.
constexpr uint64_t kCentresOffset = 0;
constexpr uint64_t kLabelsOffset = uint64_t(1) << 44;
constexpr uint64_t kNoiseOffset = uint64_t(2) << 44;
}  // namespace

SyntheticDataset::SyntheticDataset(Options opts) : opts_(std::move(opts)) {
  TR_CHECK(opts_.size >= 0, "SyntheticDataset: size must be >= 0, got ", opts_.size);
  TR_CHECK(opts_.num_classes >= 1, "SyntheticDataset: num_classes must be >= 1, got ", opts_.num_classes);
  for (int64_t s : opts_.input_shape)
    TR_CHECK(s >= 1, "SyntheticDataset: input_shape must have positive sizes, got ", opts_.input_shape);
  const int64_t N = opts_.size, K = opts_.num_classes, D = numel_of(opts_.input_shape);
  const uint64_t seed = opts_.seed;

  centers_ = dataset_storage({K, D}, DType::F32);
  float* c = centers_.data_ptr<float>();
  for (int64_t j = 0; j < K * D; ++j)
    c[j] = float(opts_.separation * philox_normal_at(seed, kCentresOffset, uint64_t(j)));

  targets_ = dataset_storage({N}, DType::I64);
  int64_t* y = targets_.data_ptr<int64_t>();
  for (int64_t i = 0; i < N; ++i)
    y[i] = std::min<int64_t>(int64_t(philox_uniform_at(seed, kLabelsOffset, uint64_t(i)) * double(K)), K - 1);

  Shape shape = opts_.input_shape;
  shape.insert(shape.begin(), N);
  inputs_ = dataset_storage(shape, DType::F32);
  float* x = inputs_.data_ptr<float>();
  const double noise = opts_.noise;
#pragma omp parallel for schedule(static) if (N * D > (1 << 16))
  for (int64_t i = 0; i < N; ++i) {
    const float* ci = c + y[i] * D;
    for (int64_t j = 0; j < D; ++j)
      x[i * D + j] = ci[j] + float(noise * philox_normal_at(seed, kNoiseOffset, uint64_t(i * D + j)));
  }
}

Example SyntheticDataset::get(int64_t i) const {
  check_index(i);
  return {inputs_[i].clone(), targets_[i].clone()};
}

Example SyntheticDataset::get_batch(const std::vector<int64_t>& idx) const {
  const int64_t B = int64_t(idx.size()), D = numel_of(opts_.input_shape);
  Shape shape = opts_.input_shape;
  shape.insert(shape.begin(), B);
  Tensor x = empty(shape, DType::F32), y = empty({B}, DType::I64);
  const float* src = inputs_.data_ptr<float>();
  const int64_t* lab = targets_.data_ptr<int64_t>();
  float* px = x.data_ptr<float>();
  int64_t* py = y.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t i = idx[size_t(b)];
    check_index(i);
    std::memcpy(px + b * D, src + i * D, size_t(D) * sizeof(float));
    py[b] = lab[i];
  }
  return {x, y};
}

std::string SyntheticDataset::describe() const {
  return str("SyntheticDataset(", opts_.size, " x ", opts_.input_shape, ", ", opts_.num_classes,
             " classes, gaussian blobs, seed=", opts_.seed, ", separation=", opts_.separation, ", noise=", opts_.noise,
             ")");
}

namespace {

// Inputs of the model's shape; the eval split has its own seed.
DatasetSplits build_synthetic(const TomlTable& t, const DatasetContext& ctx) {
  SyntheticDataset::Options o;
  o.input_shape = ctx.input_shape;
  o.num_classes = t.get_int("num_classes", 10);
  o.size = t.get_int("train_size", 4096);
  o.seed = ctx.seed;
  DatasetSplits s;
  s.train = std::make_shared<SyntheticDataset>(o);
  o.size = t.get_int("eval_size", 1024);
  o.seed = ctx.seed + 1000003;
  s.eval = std::make_shared<SyntheticDataset>(o);
  return s;
}

}  // namespace

TR_REGISTER_DATASET("synthetic", {build_synthetic,
                                  "num_classes = 10, train_size = 4096, eval_size = 1024 (inputs "
                                  "of the model's input shape)"});

}  // namespace tr::data
