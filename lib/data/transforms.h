// Random augmentations of image batches [B, C, H, W] (f32), torchvision's RandomCrop (with
// padding) and RandomHorizontalFlip. A sample's draws are a pure function of (seed, epoch, dataset
// index, transform position), so a batch is identical whatever the worker count, rank split or
// resume point, and no generator state needs checkpointing.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "core/tensor.h"

namespace tr::data {

class Transform {
 public:
  virtual ~Transform() = default;
  // Transforms `images` [B, C, H, W] in place or returns a new tensor; indices[b] is sample b's
  // dataset index. `stream` is the transform's own random stream (its position in the list).
  virtual Tensor apply(const Tensor& images, const std::vector<int64_t>& indices, int64_t epoch, uint64_t seed,
                       uint64_t stream) const = 0;
  virtual std::string describe() const = 0;
};

// RandomCrop(size, padding, fill): pad every side by `padding` with `fill`, then cut a size[0] x
// size[1] window at a uniformly drawn offset (top in [0, H + 2p - h], left in [0, W + 2p - w]).
class RandomCrop : public Transform {
 public:
  RandomCrop(int64_t height, int64_t width, int64_t padding, float fill = 0.0f);
  Tensor apply(const Tensor& images, const std::vector<int64_t>& indices, int64_t epoch, uint64_t seed,
               uint64_t stream) const override;
  std::string describe() const override;

 private:
  int64_t height_, width_, padding_;
  float fill_;
};

// RandomHorizontalFlip(p): mirrors the width axis of each sample with probability p.
class RandomHorizontalFlip : public Transform {
 public:
  explicit RandomHorizontalFlip(double p = 0.5);
  Tensor apply(const Tensor& images, const std::vector<int64_t>& indices, int64_t epoch, uint64_t seed,
               uint64_t stream) const override;
  std::string describe() const override;

 private:
  double p_;
};

// The transforms in order; stream k for the k-th.
Tensor apply_transforms(const std::vector<std::shared_ptr<const Transform>>& transforms, Tensor images,
                        const std::vector<int64_t>& indices, int64_t epoch, uint64_t seed);

// The uniform draw in [0, 1) number `k` (0..3) of sample `index` in `epoch` for `stream`.
double sample_uniform(uint64_t seed, uint64_t stream, int64_t epoch, int64_t index, int k);

}  // namespace tr::data
