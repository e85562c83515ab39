// IDX reader (a mapped file, gunzipped in memory or through the decode cache), the image/label
// dataset built on it and its registration as the dataset "idx".
#include "data/idx_dataset.h"
#include "data/dataset_registry.h"
#include "data/dataset_storage.h"
#include "data/gunzip.h"
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

namespace tr::data {

namespace {

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::string magic_meaning(uint32_t magic) {
  if (magic == IdxDataset::kImagesMagic) return "IDX images: unsigned bytes, 3 dims";
  if (magic == IdxDataset::kLabelsMagic) return "IDX labels: unsigned bytes, 1 dim";
  return str("IDX unsigned bytes, ", magic & 0xff, " dims");
}

uint32_t big_endian_u32(const uint8_t* b) {
  return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | uint32_t(b[3]);
}

}  // namespace

Tensor read_idx(const std::string& path, uint32_t expected_magic, DecodeCache* cache) {
  namespace fs = std::filesystem;
  std::error_code ec;
  TR_CHECK(fs::exists(path, ec), "IdxDataset: cannot open '", path,
           "': no such file (expected a gzipped IDX file such as Fashion-MNIST's train-images-idx3-ubyte.gz; "
           "Debian's dataset-fashion-mnist installs them under ",
           IdxDataset::kFashionMnistDir, ")");
  // The file's bytes: a valid cache entry's, else the file's own (mapped), gunzipped if gzip:
  // straight into a new cache entry when the trailer's length is the size, else in memory.
  std::optional<FileBytes> cached = cache ? cache->find(path) : std::nullopt;
  FileBytes source, bytes;
  std::string decode_error;
  std::unique_ptr<DecodeCache::Entry> entry;
  bool store_copy = false;
  if (cached) {
    bytes = *cached;
  } else {
    source = map_file(path, "IdxDataset");
    bytes = source;
    if (is_gzip(source.data, source.size)) {
      const size_t n = gzip_stated_size(source);
      if (cache) entry = cache->begin_store(path, source, n);
      if (entry && gunzip_exact(source, entry->bytes().data, n)) {
        bytes = entry->bytes();
      } else {
        store_copy = entry != nullptr;  // (an entry that could not be made was noted once)
        entry.reset();
        Gunzipped g = gunzip(source, path);
        bytes = g.bytes;
        decode_error = g.error;
      }
    }
  }
  const std::string suffix = decode_error.empty() ? "" : str(" (zlib: ", decode_error, ")");
  const int64_t n = int64_t(bytes.size);
  TR_CHECK(n >= 4, "IdxDataset: '", path, "' is truncated: ", n,
           " bytes of data, fewer than the 4-byte IDX magic number", suffix);
  const uint32_t magic = big_endian_u32(bytes.data);
  if (expected_magic != 0) {
    TR_CHECK(magic == expected_magic, "IdxDataset: '", path, "': bad magic number ", hex32(magic), ", expected ",
             hex32(expected_magic), " (", magic_meaning(expected_magic), ")");
  } else {
    TR_CHECK((magic >> 16) == 0 && ((magic >> 8) & 0xff) == 0x08 && (magic & 0xff) >= 1, "IdxDataset: '", path,
             "': bad magic number ", hex32(magic), ", expected 0x000008NN (IDX unsigned bytes, NN dims)");
  }
  const int ndims = int(magic & 0xff);
  const int64_t header = 4 + 4 * int64_t(ndims);
  TR_CHECK(n >= header, "IdxDataset: '", path, "' is truncated: the header declares ", ndims, " dimensions (",
           4 * ndims, " bytes of sizes), found ", n - 4, " bytes", suffix);
  const int64_t avail = n - header;
  Shape sizes;
  int64_t total = 1;
  bool overflow = false;
  for (int d = 0; d < ndims; ++d) {
    const int64_t s = int64_t(big_endian_u32(bytes.data + 4 + 4 * d));
    sizes.push_back(s);
    if (s != 0 && total > std::numeric_limits<int64_t>::max() / s)
      overflow = true;
    else
      total *= s;
  }
  TR_CHECK(!overflow, "IdxDataset: '", path, "' is truncated or corrupt: the header promises ", sizes,
           " bytes of data, more than any file holds (", avail, " bytes follow the header)", suffix);
  TR_CHECK(total <= avail, "IdxDataset: '", path, "' is truncated: the header promises ", sizes, " = ", total,
           " bytes of data, found ", avail, " bytes", suffix);
  TR_CHECK(total == avail, "IdxDataset: '", path, "': more data than the header's ", sizes, " = ", total,
           " bytes (corrupt header?)");
  TR_CHECK(decode_error.empty(), "IdxDataset: '", path, "': corrupt gzip data after the IDX data", suffix);
  // Kept once the file proved to be a whole IDX file (a damaged one throws above, and its
  // uncommitted entry is removed).
  if (entry)
    entry->commit();
  else if (store_copy)
    cache->store(path, source, bytes);
  return from_blob(bytes.data + header, sizes, DType::U8, bytes.owner);
}

IdxDataset::IdxDataset(const std::string& images_path, const std::string& labels_path,
                       std::optional<Normalize> normalize, DecodeCache* cache)
    : images_path_(images_path), labels_path_(labels_path), normalize_(normalize) {
  Tensor images = read_idx(images_path, kImagesMagic, cache);  // [N, rows, cols]
  Tensor labels = read_idx(labels_path, kLabelsMagic, cache);  // [N]
  TR_CHECK(images.size(0) == labels.size(0), "IdxDataset: image/label count mismatch: '", images_path, "' holds ",
           images.size(0), " images but '", labels_path, "' holds ", labels.size(0), " labels");
  images_ = images.view({images.size(0), 1, images.size(1), images.size(2)});
  // Labels widen to i64 once (torch's targets are int64).
  const int64_t n = labels.size(0);
  labels_ = dataset_storage({n}, DType::I64);
  const uint8_t* l8 = labels.data_ptr<uint8_t>();
  int64_t* l64 = labels_.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    l64[i] = l8[i];
    num_classes_ = std::max<int64_t>(num_classes_, l8[i] + 1);
  }
  if (normalize_) {
    TR_CHECK(normalize_->std != 0.0f, "IdxDataset: normalize std must be non-zero, got ", normalize_->std);
  }
}

IdxDataset IdxDataset::fashion_mnist(bool train, std::optional<Normalize> normalize, const std::string& dir,
                                     DecodeCache* cache) {
  const std::string split = train ? "train" : "t10k";
  return IdxDataset(dir + "/" + split + "-images-idx3-ubyte.gz", dir + "/" + split + "-labels-idx1-ubyte.gz", normalize,
                    cache);
}

// The same f32 operations in 8- or 16-lane registers: IEEE division and subtraction round each
// lane as the scalar code does, so the pixels equal a table of them (a table lookup per byte ran at
// 3.5% of fmnist_mlp's step, on the step's critical path without workers).
void bytes_to_pixels(const uint8_t* s, float* d, int64_t n, float mean, float std, bool normalize) {
  if (normalize) {
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) d[k] = (float(s[k]) / 255.0f - mean) / std;
  } else {
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) d[k] = float(s[k]) / 255.0f;
  }
}

void IdxDataset::gather(const std::vector<int64_t>& idx, float* x, int64_t* y) const {
  const int64_t row = images_.numel() / std::max<int64_t>(size(), 1);
  const uint8_t* src = images_.data_ptr<uint8_t>();
  const int64_t* lab = labels_.data_ptr<int64_t>();
  for (size_t b = 0; b < idx.size(); ++b) {
    const int64_t i = idx[b];
    check_index(i);
    const uint8_t* s = src + i * row;
    float* d = x + int64_t(b) * row;
    bytes_to_pixels(s, d, row, normalize_ ? normalize_->mean : 0.0f, normalize_ ? normalize_->std : 1.0f,
                    normalize_.has_value());
    y[b] = lab[i];
  }
}

Example IdxDataset::get(int64_t i) const {
  Shape shape(images_.sizes().begin() + 1, images_.sizes().end());
  Tensor x = empty(shape, DType::F32);
  Tensor y = empty({}, DType::I64);
  gather({i}, x.data_ptr<float>(), y.data_ptr<int64_t>());
  return {x, y};
}

Example IdxDataset::get_batch(const std::vector<int64_t>& idx) const {
  Shape shape = images_.sizes();
  shape[0] = int64_t(idx.size());
  Tensor x = empty(shape, DType::F32);
  Tensor y = empty({int64_t(idx.size())}, DType::I64);
  gather(idx, x.data_ptr<float>(), y.data_ptr<int64_t>());
  return {x, y};
}

std::string IdxDataset::describe() const {
  Shape shape(images_.sizes().begin() + 1, images_.sizes().end());
  std::string s = str("IdxDataset(", size(), " x ", shape, ", ", num_classes_, " classes, images='", images_path_,
                      "', labels='", labels_path_, "'");
  if (normalize_) s += str(", normalize=(", normalize_->mean, ", ", normalize_->std, ")");
  return s + ")";
}

std::optional<IdxDataset::Normalize> read_normalize(const TomlTable& t, DatasetSplits& s) {
  if (!t.has("normalize")) return std::nullopt;
  std::vector<double> n = t.get_floats("normalize");
  if (n.size() != 2 || n[1] <= 0) t.fail("normalize", "must be [mean, std] with std > 0");
  s.pixel_mean = n[0];
  s.pixel_std = n[1];
  return IdxDataset::Normalize{float(n[0]), float(n[1])};
}

namespace {

DatasetSplits build_idx(const TomlTable& t, const DatasetContext& ctx) {
  const std::string dir = std::string(IdxDataset::kFashionMnistDir) + "/";
  auto path = [&](const char* key, const char* file) {  // recorded as resolved
    std::string p = resolve_path(t.get_string(key, dir + file), ctx.config_dir);
    t.record(key, p);
    return p;
  };
  const std::string train_images = path("train_images", "train-images-idx3-ubyte.gz");
  const std::string train_labels = path("train_labels", "train-labels-idx1-ubyte.gz");
  const std::string test_images = path("test_images", "t10k-images-idx3-ubyte.gz");
  const std::string test_labels = path("test_labels", "t10k-labels-idx1-ubyte.gz");
  DatasetSplits s;
  const std::optional<IdxDataset::Normalize> norm = read_normalize(t, s);
  // [data] cache: decoded copies of the gzipped files (DecodeCache::default_dir(), e.g.
  // ~/.cache/trainer/datasets), so later runs map them instead of decompressing
  std::optional<DecodeCache> cache;
  if (t.get_bool("cache", true) && !DecodeCache::default_dir().empty()) cache.emplace(DecodeCache::default_dir());
  DecodeCache* c = cache ? &*cache : nullptr;
  s.train = std::make_shared<IdxDataset>(train_images, train_labels, norm, c);
  s.eval = std::make_shared<IdxDataset>(test_images, test_labels, norm, c);
  if (cache) s.notes = cache->notes();
  return s;
}

}  // namespace

TR_REGISTER_DATASET("idx", {build_idx,
                            "train_images, train_labels, test_images, test_labels (default: Debian's "
                            "Fashion-MNIST), normalize = [mean, std], cache = true"});

}  // namespace tr::data
