// Random augmentations of training batches and their registry behind [data] transforms =
// [{type = ...}]: Registry<TransformType>, each transform registered from its own file
// (random_crop.cpp, random_horizontal_flip.cpp). A sample's draws are a pure function of (seed,
// epoch, dataset index, transform position), so a batch is identical whatever the worker count,
// rank split or resume point, and no generator state needs checkpointing.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "core/registry.h"
#include "core/tensor.h"
#include "toml/toml_table.h"

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

using TransformPtr = std::shared_ptr<const Transform>;

// What a transform's builder gets besides its table.
struct TransformContext {
  Shape sample;                              // the dataset's per-sample input shape
  std::string dataset;                       // its name, for messages
  double pixel_mean = 0.0, pixel_std = 1.0;  // the dataset's pixel normalisation (DatasetSplits)
};

struct TransformType {
  std::function<TransformPtr(const TomlTable& t, const TransformContext& ctx)> build;
  std::string doc;  // one line: the keys it takes

  static constexpr const char* kRegistryKind = "transform";
};

#define TR_REGISTER_TRANSFORM(NAME, ...)                                                                            \
  static const ::tr::Registrar<::tr::data::TransformType> TR_REGISTRY_CONCAT(tr_transform_registrar_, __COUNTER__)( \
      NAME, __VA_ARGS__)

// The transforms a [data] table lists under `transforms` (none without the key), in order.
std::vector<TransformPtr> build_transforms(const TomlTable& data, const TransformContext& ctx);
// For image transforms, once every key is read: reports an unknown key (t.finish()) first, then
// throws unless the samples are images [C, H, W].
void expect_image_samples(const TomlTable& t, const TransformContext& ctx, const std::string& type);

// The transforms in order; stream k for the k-th.
Tensor apply_transforms(const std::vector<TransformPtr>& transforms, Tensor images, const std::vector<int64_t>& indices,
                        int64_t epoch, uint64_t seed);

// Throws unless `x` is a CPU f32 image batch [B, C, H, W] (what transforms apply to).
void check_image_batch(const Tensor& x, const char* who);

// The uniform draw in [0, 1) number `k` (0..3) of sample `index` in `epoch` for `stream`.
double sample_uniform(uint64_t seed, uint64_t stream, int64_t epoch, int64_t index, int k);

}  // namespace tr::data
