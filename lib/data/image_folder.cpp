#include "data/image_folder.h"
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include "core/error.h"
#include "data/dataset_registry.h"
#include "data/image_decode.h"

namespace tr::data {

namespace fs = std::filesystem;

namespace {

bool is_image_file(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return e == ".png" || e == ".jpg" || e == ".jpeg";
}

}  // namespace

ImageFolderDataset::ImageFolderDataset(Options o) : opts_(std::move(o)) {
  std::error_code ec;
  TR_CHECK(fs::is_directory(opts_.root, ec), "image folder ", opts_.root,
           ": not a directory (expected <root>/<class>/<image>)", ec ? " (" + ec.message() + ")" : std::string());
  if (opts_.classes.empty()) {
    for (const auto& e : fs::directory_iterator(opts_.root))
      if (e.is_directory()) opts_.classes.push_back(e.path().filename().string());
    std::sort(opts_.classes.begin(), opts_.classes.end());
    TR_CHECK(!opts_.classes.empty(), "image folder ", opts_.root, ": no class subfolders");
  }
  for (size_t c = 0; c < opts_.classes.size(); ++c) {
    const fs::path dir = fs::path(opts_.root) / opts_.classes[c];
    std::vector<std::string> names;
    if (fs::is_directory(dir))
      for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file() && is_image_file(e.path())) names.push_back(e.path().string());
    std::sort(names.begin(), names.end());
    for (auto& n : names) files_.emplace_back(std::move(n), int64_t(c));
  }
  // a class of the eval root that the training root does not have
  for (const auto& e : fs::directory_iterator(opts_.root))
    if (e.is_directory() &&
        std::find(opts_.classes.begin(), opts_.classes.end(), e.path().filename().string()) == opts_.classes.end())
      throw Error(str("image folder ", opts_.root, ": class '", e.path().filename().string(),
                      "' is not among the training folder's classes (", opts_.classes, ")"));
  TR_CHECK(!files_.empty(), "image folder ", opts_.root, ": no .png, .jpg or .jpeg files under its class folders");
  const size_t C = size_t(opts_.channels);
  TR_CHECK((opts_.mean.size() == 1 || opts_.mean.size() == C) && opts_.mean.size() == opts_.std.size(), "image folder ",
           opts_.root, ": mean and std need 1 or ", C, " values each");
}

void ImageFolderDataset::load(int64_t i, float* chw, int64_t* label) const {
  const auto& [path, cls] = files_[size_t(i)];
  std::ifstream f(path, std::ios::binary);
  TR_CHECK(f, "image folder: cannot read ", path);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  DecodedImage img = decode_image(bytes.data(), bytes.size(), int(opts_.channels), str("image ", path));
  img = resize_bilinear(img, opts_.height, opts_.width);
  const int64_t C = opts_.channels, HW = opts_.height * opts_.width;
  for (int64_t c = 0; c < C; ++c) {
    const float mean = opts_.mean[opts_.mean.size() == 1 ? 0 : size_t(c)],
                std = opts_.std[opts_.std.size() == 1 ? 0 : size_t(c)];
    float* d = chw + c * HW;
    const uint8_t* s = img.pixels.data() + c;
    for (int64_t k = 0; k < HW; ++k) d[k] = (float(s[k * C]) / 255.0f - mean) / std;
  }
  *label = cls;
}

Example ImageFolderDataset::get(int64_t i) const {
  check_index(i);
  Tensor x = empty({opts_.channels, opts_.height, opts_.width}, DType::F32), y = empty({}, DType::I64);
  load(i, x.data_ptr<float>(), y.data_ptr<int64_t>());
  return {x, y};
}

Example ImageFolderDataset::get_batch(const std::vector<int64_t>& idx) const {
  const int64_t B = int64_t(idx.size()), n = opts_.channels * opts_.height * opts_.width;
  Tensor x = empty({B, opts_.channels, opts_.height, opts_.width}, DType::F32), y = empty({B}, DType::I64);
  for (int64_t b = 0; b < B; ++b) {
    check_index(idx[size_t(b)]);
    load(idx[size_t(b)], x.data_ptr<float>() + b * n, y.data_ptr<int64_t>() + b);
  }
  return {x, y};
}

std::string ImageFolderDataset::describe() const {
  return str("ImageFolderDataset('", opts_.root, "', ", size(), " images, ", opts_.classes.size(),
             " classes, decoded to [", opts_.channels, ", ", opts_.height, ", ", opts_.width, "])");
}

namespace {

DatasetSplits build_image_folder(const TomlTable& t, const DatasetContext& ctx) {
  const Shape& in = ctx.input_shape;
  if (in.size() != 3 || (in[0] != 1 && in[0] != 3))
    t.fail("dataset", str("image_folder decodes images to [1 or 3, H, W]; the model's input is ", in));
  ImageFolderDataset::Options o;
  o.channels = in[0];
  o.height = in[1];
  o.width = in[2];
  DatasetSplits s;
  if (t.has("normalize")) {
    std::vector<double> n = t.get_floats("normalize");
    if (n.size() != 2 || n[1] <= 0)
      t.fail("normalize", "must be [mean, std] with std > 0 (or give mean and std per channel)");
    o.mean = {float(n[0])};
    o.std = {float(n[1])};
    s.pixel_mean = n[0];
    s.pixel_std = n[1];
  }
  if (t.has("mean") || t.has("std")) {
    const std::vector<double> m = t.get_floats("mean"), sd = t.get_floats("std");
    if (m.size() != size_t(o.channels) || sd.size() != size_t(o.channels))
      t.fail("mean", str("and std need ", o.channels, " values each (one per channel)"));
    o.mean.assign(m.begin(), m.end());
    o.std.assign(sd.begin(), sd.end());
  }
  o.root = resolve_path(t.get_string("train"), ctx.config_dir);
  auto train = std::make_shared<ImageFolderDataset>(o);
  o.root = resolve_path(t.get_string("eval"), ctx.config_dir);
  o.classes = train->classes();
  s.eval = std::make_shared<ImageFolderDataset>(o);
  s.train = train;
  return s;
}

}  // namespace

TR_REGISTER_DATASET("image_folder", {build_image_folder,
                                     "train, eval (folders of <class>/<image>: PNG or JPEG), "
                                     "normalize = [mean, std] or mean, std per channel"});

}  // namespace tr::data
