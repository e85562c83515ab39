// The dataset registry behind [data] dataset = "...": Registry<DatasetType>. Each dataset
// registers itself from its own file with a builder that reads its keys from the [data] table
// (the common keys batch_size, shuffle, ... belong to the run config) and gets the rest from a
// context: the run's seed, the model's per-sample input shape, the config's directory.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "core/registry.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "toml/toml_table.h"

namespace tr::data {

struct DatasetContext {
  uint64_t seed = 0;       // the run's seed
  Shape input_shape;       // the model's per-sample input
  std::string config_dir;  // relative paths are tried against it (after the working directory)
  int64_t vocab_size = 0;  // rows of the model's first token embedding (0: none): token ids must be below it
};

// What a dataset builder makes: the training and evaluation splits.
struct DatasetSplits {
  std::shared_ptr<const Dataset> train, eval;
  // The normalisation the dataset applies to pixels in [0, 1] (x - mean) / std: transforms that
  // fill pixels (random_crop's fill) take their value through it.
  double pixel_mean = 0.0, pixel_std = 1.0;
  // What the user should hear about (a stale or damaged cache entry rebuilt): printed as warnings.
  std::vector<std::string> notes;
  // What the splits were fitted with (a JSON object; "" for none): a CSV table's standardisation
  // and classes. Checkpoints keep it; a resume whose data gives another is refused.
  std::string state;
};

struct DatasetType {
  std::function<DatasetSplits(const TomlTable& data, const DatasetContext& ctx)> build;
  std::string doc;  // one line: the keys it takes

  static constexpr const char* kRegistryKind = "dataset";
};

#define TR_REGISTER_DATASET(NAME, ...)                                                                          \
  static const ::tr::Registrar<::tr::data::DatasetType> TR_REGISTRY_CONCAT(tr_dataset_registrar_, __COUNTER__)( \
      NAME, __VA_ARGS__)

}  // namespace tr::data
