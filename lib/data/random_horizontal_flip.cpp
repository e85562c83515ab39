// RandomHorizontalFlip and its [data] transforms registration "random_horizontal_flip".
#include "data/random_horizontal_flip.h"

namespace tr::data {

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  TR_CHECK(p >= 0.0 && p <= 1.0, "RandomHorizontalFlip: p must be in [0, 1], got ", p);
}

Tensor RandomHorizontalFlip::apply(const Tensor& images, const std::vector<int64_t>& indices, int64_t epoch,
                                   uint64_t seed, uint64_t stream) const {
  check_image_batch(images, "RandomHorizontalFlip");
  Tensor x = images.contiguous().clone();
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  TR_CHECK(int64_t(indices.size()) == B, "RandomHorizontalFlip: ", indices.size(), " indices for a batch of ", B);
  float* d = x.data_ptr<float>();
  for (int64_t b = 0; b < B; ++b) {
    if (!(sample_uniform(seed, stream, epoch, indices[size_t(b)], 0) < p_)) continue;  // torch.rand(1) < p
    for (int64_t r = 0; r < C * H; ++r) {
      float* row = d + (b * C * H + r) * W;
      for (int64_t j = 0; j < W / 2; ++j) std::swap(row[j], row[W - 1 - j]);
    }
  }
  return x;
}

std::string RandomHorizontalFlip::describe() const { return str("RandomHorizontalFlip(p=", p_, ")"); }

namespace {

TransformPtr build_random_horizontal_flip(const TomlTable& t, const TransformContext& ctx) {
  const double p = t.get_float("p", 0.5);
  if (!(p >= 0 && p <= 1)) t.fail("p", "must be in [0, 1]");
  expect_image_samples(t, ctx, "random_horizontal_flip");
  return std::make_shared<RandomHorizontalFlip>(p);
}

}  // namespace

TR_REGISTER_TRANSFORM("random_horizontal_flip", {build_random_horizontal_flip, "p = 0.5"});

}  // namespace tr::data
