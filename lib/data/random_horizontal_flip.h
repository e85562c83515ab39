// RandomHorizontalFlip: torchvision's RandomHorizontalFlip(p) on image batches.
#pragma once
#include "data/transforms.h"

namespace tr::data {

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

}  // namespace tr::data
