// RandomCrop and its [data] transforms registration "random_crop".
#include "data/random_crop.h"

namespace tr::data {

RandomCrop::RandomCrop(int64_t height, int64_t width, int64_t padding, float fill)
    : height_(height), width_(width), padding_(padding), fill_(fill) {
  TR_CHECK(height >= 1 && width >= 1, "RandomCrop: size must be positive, got [", height, ", ", width, "]");
  TR_CHECK(padding >= 0, "RandomCrop: padding must be >= 0, got ", padding);
}

Tensor RandomCrop::apply(const Tensor& images, const std::vector<int64_t>& indices, int64_t epoch, uint64_t seed,
                         uint64_t stream) const {
  check_image_batch(images, "RandomCrop");
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
    const int64_t top =
        int64_t(sample_uniform(seed, stream, epoch, indices[size_t(b)], 0) * double(H + 2 * p - height_ + 1));
    const int64_t left =
        int64_t(sample_uniform(seed, stream, epoch, indices[size_t(b)], 2) * double(W + 2 * p - width_ + 1));
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

namespace {

// The crop's size must be the model's input size; fill is in pixel units in [0, 1] and goes
// through the dataset's normalisation like the pixels (torchvision pads before Normalize).
TransformPtr build_random_crop(const TomlTable& t, const TransformContext& ctx) {
  std::vector<int64_t> size;
  if (t.has("size")) size = t.get_pair("size", {});
  const int64_t padding = t.get_int("padding", 0);
  if (padding < 0) t.fail("padding", "must be >= 0");
  const double fill = t.get_float("fill", 0.0);
  if (!size.empty() && (size[0] < 1 || size[1] < 1)) t.fail("size", "must be positive");
  expect_image_samples(t, ctx, "random_crop");
  const Shape& s = ctx.sample;
  const int64_t h = size.empty() ? s[1] : size[0], w = size.empty() ? s[2] : size[1];
  TR_CHECK(h == s[1] && w == s[2], "[data] transforms: random_crop size [", h, ", ", w,
           "] must equal the model's input size [", s[1], ", ", s[2], "]");
  return std::make_shared<RandomCrop>(h, w, padding, float((fill - ctx.pixel_mean) / ctx.pixel_std));
}

}  // namespace

TR_REGISTER_TRANSFORM("random_crop", {build_random_crop,
                                      "padding = 0, size (default and only value: the input's [H, W]), "
                                      "fill = 0.0 (pixel units in [0, 1], normalised like the pixels)"});

}  // namespace tr::data
