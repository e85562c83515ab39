// ImageFolderDataset (dataset = "image_folder"), torchvision's ImageFolder: root/<class>/<image>,
// the classes the training root's subfolders in sorted order, the files of each in sorted order;
// PNG or JPEG (data/image_decode.h) decoded when a batch is gathered (on the loader's workers with
// [data] workers > 0), resized to the model's [C, H, W] (bilinear, as Resize) and made a tensor as
// ToTensor + Normalize do (x / 255, then (x - mean[c]) / std[c], in f32).
#pragma once
#include <string>
#include <vector>
#include "data/dataset.h"

namespace tr::data {

class ImageFolderDataset : public Dataset {
 public:
  struct Options {
    std::string root;
    std::vector<std::string> classes;  // empty: the root's subfolders (the training split's)
    int64_t channels = 3, height = 32, width = 32;
    std::vector<float> mean{0.0f}, std{1.0f};  // one value for every channel, or one per channel
  };
  explicit ImageFolderDataset(Options o);

  int64_t size() const override { return int64_t(files_.size()); }
  Example get(int64_t i) const override;
  Example get_batch(const std::vector<int64_t>& idx) const override;
  std::string describe() const override;
  const std::vector<std::string>& classes() const { return opts_.classes; }
  const std::string& file(int64_t i) const { return files_[size_t(i)].first; }
  int64_t label(int64_t i) const { return files_[size_t(i)].second; }

 private:
  void load(int64_t i, float* chw, int64_t* label) const;
  Options opts_;
  std::vector<std::pair<std::string, int64_t>> files_;  // path, class
};

}  // namespace tr::data
