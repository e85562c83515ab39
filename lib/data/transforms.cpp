// The per-sample random draws of transforms (one Philox block per sample) and the transform list of [data].
#include "data/transforms.h"
#include "core/error.h"
#include "core/philox.h"

namespace tr::data {

void check_image_batch(const Tensor& x, const char* who) {
  TR_CHECK(x.dim() == 4 && x.dtype() == DType::F32 && x.device().is_cpu(), who,
           ": expected a CPU f32 image batch [B, C, H, W], got ", dtype_name(x.dtype()), " ", x.sizes());
}

double sample_uniform(uint64_t seed, uint64_t stream, int64_t epoch, int64_t index, int k) {
  // key: the run's seed and the transform's stream; counter: (epoch, index), index < 2^40
  const uint64_t key = seed ^ ((stream + 1) * 0x9E3779B97F4A7C15ull);
  const uint64_t counter = (uint64_t(epoch) << 40) | (uint64_t(index) & ((uint64_t(1) << 40) - 1));
  Philox4 b = philox4x32_10(key, counter);
  return philox_uniform_f64(b.v[k % 4], b.v[(k + 1) % 4]);
}

std::vector<TransformPtr> build_transforms(const TomlTable& data, const TransformContext& ctx) {
  std::vector<TransformPtr> r;
  if (!data.has("transforms")) return r;
  for (const TomlTable& t : data.get_tables("transforms")) {
    r.push_back(t.get_registered<TransformType>("type").build(t, ctx));
    t.finish();
  }
  return r;
}

void expect_image_samples(const TomlTable& t, const TransformContext& ctx, const std::string& type) {
  t.finish();  // a misspelt key says more than what the data lacks
  if (ctx.sample.size() != 3)
    throw Error(str(t.location(), ": [data] transforms: ", type, " needs image samples [C, H, W], but the ",
                    ctx.dataset, " data gives ", ctx.sample));
}

Tensor apply_transforms(const std::vector<TransformPtr>& transforms, Tensor images, const std::vector<int64_t>& indices,
                        int64_t epoch, uint64_t seed) {
  for (size_t k = 0; k < transforms.size(); ++k) images = transforms[k]->apply(images, indices, epoch, seed, k);
  return images;
}

}  // namespace tr::data
