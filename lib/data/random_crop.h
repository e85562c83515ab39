// RandomCrop: torchvision's RandomCrop(size, padding, fill) on image batches.
#pragma once
#include "data/transforms.h"

namespace tr::data {

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

}  // namespace tr::data
