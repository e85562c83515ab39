// RecordIODataset (dataset = "recordio"): images with labels from MXNet's .rec + .idx (data/
// recordio.h), in the index's order: raw u8 images of [data] image_shape ([C, H, W]: what `trainer
// pack --recordio` writes from IDX files), or PNG / JPEG ones decoded and resized to it (as
// MXNet's ImageRecordIter does). Every record is read and checked when the dataset opens, into one
// u8 tensor, and batches are gathered as IdxDataset's (the same ToTensor + Normalize).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include "data/dataset.h"
#include "data/idx_dataset.h"

namespace tr::data {

class RecordIODataset : public Dataset {
 public:
  RecordIODataset(const std::string& rec, const std::string& idx, const Shape& image_shape,
                  std::optional<IdxDataset::Normalize> normalize, int64_t num_classes);

  int64_t size() const override { return labels_.numel(); }
  Example get(int64_t i) const override;
  Example get_batch(const std::vector<int64_t>& idx) const override;
  std::string describe() const override;

 private:
  std::string rec_;
  Tensor images_, labels_;  // u8 [N, C, H, W], i64 [N]
  std::optional<IdxDataset::Normalize> normalize_;
  int64_t multipart_ = 0;  // records that were split at a magic word
  int64_t encoded_ = 0;    // PNG or JPEG records
};

}  // namespace tr::data
