// IdxDataset: MNIST-format image classification data (gzipped or plain IDX files), e.g.
// Fashion-MNIST; torchvision's FashionMNIST + ToTensor (+ Normalize) with the same numbers.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include "data/dataset.h"
#include "data/dataset_registry.h"
#include "data/decode_cache.h"

namespace tr::data {

// The bytes of one IDX file of unsigned bytes: magic 0x000008NN (NN = number of dims), then NN
// big-endian u32 sizes, then the data. `data` is u8 with those sizes, over the file's mapped bytes
// (no copy). A gzip file (by its magic bytes) is decompressed, or its decoded copy in `cache`
// mapped when it has a valid one (and stored there after decoding); a plain file is mapped as is.
// Throws with the path and expected-vs-found for a missing, short, corrupt or wrongly typed file;
// `expected_magic` 0 accepts any unsigned-byte IDX file.
Tensor read_idx(const std::string& path, uint32_t expected_magic = 0, DecodeCache* cache = nullptr);

// n bytes -> n pixels: ToTensor's x / 255, then Normalize's (x - mean) / std, each rounded to f32
// as torch does (a vector loop: IEEE division and subtraction round each lane as scalar code).
// Shared by the readers of raw u8 images (IDX, RecordIO).
void bytes_to_pixels(const uint8_t* s, float* d, int64_t n, float mean, float std, bool normalize);

class IdxDataset : public Dataset {
 public:
  // torchvision.transforms.Normalize((mean,), (std,)) applied after the scaling to [0, 1].
  struct Normalize {
    float mean = 0.0f;
    float std = 1.0f;
  };
  static constexpr uint32_t kImagesMagic = 0x00000803;  // u8, 3 dims: [N, rows, cols]
  static constexpr uint32_t kLabelsMagic = 0x00000801;  // u8, 1 dim: [N]
  static constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

  // `cache`: decoded copies of gzipped files (null: decode in memory).
  IdxDataset(const std::string& images_path, const std::string& labels_path,
             std::optional<Normalize> normalize = std::nullopt, DecodeCache* cache = nullptr);
  // Fashion-MNIST from `dir` ({train,t10k}-{images-idx3,labels-idx1}-ubyte.gz).
  static IdxDataset fashion_mnist(bool train, std::optional<Normalize> normalize = std::nullopt,
                                  const std::string& dir = kFashionMnistDir, DecodeCache* cache = nullptr);

  int64_t size() const override { return images_.size(0); }
  // input: f32 [1, rows, cols] in [0, 1] (or normalised); target: i64 scalar (the class).
  Example get(int64_t i) const override;
  // input: f32 [B, 1, rows, cols]; target: i64 [B]. One vectorised pass over the rows.
  Example get_batch(const std::vector<int64_t>& idx) const override;
  std::string describe() const override;

  // The raw data, kept once and contiguous: u8 [N, 1, rows, cols] (over the mapped file or cache
  // entry) and i64 [N].
  const Tensor& images() const { return images_; }
  const Tensor& labels() const { return labels_; }
  int64_t num_classes() const { return num_classes_; }  // max label + 1

 private:
  void gather(const std::vector<int64_t>& idx, float* x, int64_t* y) const;

  std::string images_path_, labels_path_;
  Tensor images_;
  Tensor labels_;
  std::optional<Normalize> normalize_;
  int64_t num_classes_ = 0;
};

// [data] normalize = [mean, std] of the raw-image readers (IDX, RecordIO): none when absent; sets
// the splits' pixel_mean and pixel_std (the values transforms fill with).
std::optional<IdxDataset::Normalize> read_normalize(const TomlTable& t, DatasetSplits& s);

}  // namespace tr::data
