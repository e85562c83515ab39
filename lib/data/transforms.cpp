// RandomCrop and RandomHorizontalFlip on f32 image batches, one Philox block per sample.
#include "data/transforms.h"
#include <cstring>
#include "core/error.h"
#include "core/philox.h"

namespace tr::data {

namespace {

void check_images(const Tensor& x, const char* who) {
  TR_CHECK(x.dim() == 4 && x.dtype() == DType::F32 && x.device().is_cpu(), who,
           ": expected a CPU f32 image batch [B, C, H, W], got ", dtype_name(x.dtype()), " ", x.sizes());
}

}  // namespace

double sample_uniform(uint64_t seed, uint64_t stream, int64_t epoch, int64_t index, int k) {
  // key: the run's seed and the transform's stream; counter: (epoch, index), index < 2^40
  const uint64_t key = seed ^ ((stream + 1) * 0x9E3779B97F4A7C15ull);
  const uint64_t counter = (uint64_t(epoch) << 40) | (uint64_t(index) & ((uint64_t(1) << 40) - 1));
  Philox4 b = philox4x32_10(key, counter);
  return philox_uniform_f64(b.v[k % 4], b.v[(k + 1) % 4]);
}

RandomCrop::RandomCrop(int64_t height, int64_t width, int64_t padding, float fill)
    : height_(height), width_(width), padding_(padding), fill_(fill) {
  TR_CHECK(height >= 1 && width >= 1, "RandomCrop: size must be positive, got [", height, ", ", width, "]");
  TR_CHECK(padding >= 0, "RandomCrop: padding must be >= 0, got ", padding);
}

Tensor RandomCrop::apply(const Tensor& images, const std::vector<int64_t>& indices, int64_t epoch, uint64_t seed,
                         uint64_t stream) const {
  check_images(images, "RandomCrop");
  Tensor x = images.contiguous();
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), p = padding_;
  TR_CHECK(int64_t(indices.size()) == B, "RandomCrop: ", indices.size(), " indices for a batch of ", B);
  TR_CHECK(height_ <= H + 2 * p && width_ <= W + 2 * p, "RandomCrop: required crop size [", height_, ", ", width_,
           "] is larger than the padded input image size [", H + 2 * p, ", ", W + 2 * p, "]");
  Tensor out = empty({B, C, height_, width_}, DType::F32);
  const float* src = x.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  for (int64_t b = 0; b < B; ++b) {
    // torch.randint(0, n + 1): top and left of the window in padded coordinates
    const int64_t top = int64_t(sample_uniform(seed, stream, epoch, indices[size_t(b)], 0) * double(H + 2 * p - height_ + 1));
    const int64_t left = int64_t(sample_uniform(seed, stream, epoch, indices[size_t(b)], 2) * double(W + 2 * p - width_ + 1));
    for (int64_t c = 0; c < C; ++c) {
      const float* s = src + (b * C + c) * H * W;
      float* d = dst + (b * C + c) * height_ * width_;
      for (int64_t i = 0; i < height_; ++i) {
        const int64_t si = top + i - p;  // source row
        for (int64_t j = 0; j < width_; ++j) {
          const int64_t sj = left + j - p;
          d[i * width_ + j] = (si >= 0 && si < H && sj >= 0 && sj < W) ? s[si * W + sj] : fill_;
        }
      }
    }
  }
  return out;
}

std::string RandomCrop::describe() const {
  return str("RandomCrop(size=(", height_, ", ", width_, "), padding=", padding_, ", fill=", fill_, ")");
}

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  TR_CHECK(p >= 0.0 && p <= 1.0, "RandomHorizontalFlip: p must be in [0, 1], got ", p);
}

Tensor RandomHorizontalFlip::apply(const Tensor& images, const std::vector<int64_t>& indices, int64_t epoch,
                                   uint64_t seed, uint64_t stream) const {
  check_images(images, "RandomHorizontalFlip");
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

Tensor apply_transforms(const std::vector<std::shared_ptr<const Transform>>& transforms, Tensor images,
                        const std::vector<int64_t>& indices, int64_t epoch, uint64_t seed) {
  for (size_t k = 0; k < transforms.size(); ++k) images = transforms[k]->apply(images, indices, epoch, seed, k);
  return images;
}

}  // namespace tr::data
