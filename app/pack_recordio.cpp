// `trainer pack --recordio`: images as MXNet RecordIO files.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include "app/pack_writers.h"
#include "core/error.h"
#include "data/idx_dataset.h"
#include "data/image_folder.h"
#include "data/recordio.h"

namespace tr::app {

namespace {

void create_parent_directories(const std::string& path) {
  if (auto parent = std::filesystem::path(path).parent_path(); !parent.empty())
    std::filesystem::create_directories(parent);
}

}  // namespace

void pack_recordio(const std::string& out, const std::string& dir) {
  create_parent_directories(out);
  for (bool train : {true, false}) {
    const data::IdxDataset ds = data::IdxDataset::fashion_mnist(train, std::nullopt, dir);
    const std::string rec = out + (train ? "_train.rec" : "_test.rec"),
                      idx = out + (train ? "_train.idx" : "_test.idx");
    data::RecordIOWriter w(rec, idx);
    const Tensor images = ds.images().contiguous(), labels = ds.labels();
    const int64_t n = ds.size(), row = images.numel() / std::max<int64_t>(n, 1);
    for (int64_t i = 0; i < n; ++i)
      w.write(uint64_t(i), data::pack_image_record(float(labels.data_ptr<int64_t>()[i]), uint64_t(i),
                                                   images.data_ptr<uint8_t>() + i * row, size_t(row)));
    w.close();
    std::printf("wrote %s and %s: %lld images of %lld bytes\n", rec.c_str(), idx.c_str(), (long long)n, (long long)row);
  }
}

void pack_recordio_folder(const std::string& out, const std::string& dir) {
  create_parent_directories(out);
  data::ImageFolderDataset::Options o;
  o.root = dir;
  const data::ImageFolderDataset ds(o);
  const std::string rec = out + ".rec", idx = out + ".idx";
  data::RecordIOWriter w(rec, idx);
  for (int64_t i = 0; i < ds.size(); ++i) {
    std::ifstream f(ds.file(i), std::ios::binary);
    TR_CHECK(f, "trainer pack: cannot read ", ds.file(i));
    const std::vector<uint8_t> img((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    w.write(uint64_t(i), data::pack_image_record(float(ds.label(i)), uint64_t(i), img.data(), img.size()));
  }
  w.close();
  std::printf("wrote %s and %s: %lld images of %zu classes\n", rec.c_str(), idx.c_str(), (long long)ds.size(),
              ds.classes().size());
}

}  // namespace tr::app
