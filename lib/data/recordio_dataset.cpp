#include "data/recordio_dataset.h"
#include <cmath>
#include <cstring>
#include <fstream>
#include "core/error.h"
#include "data/dataset_registry.h"
#include "data/dataset_storage.h"
#include "data/file_bytes.h"
#include "data/image_decode.h"
#include "data/recordio.h"

namespace tr::data {

RecordIODataset::RecordIODataset(const std::string& rec, const std::string& idx, const Shape& shape,
                                 std::optional<IdxDataset::Normalize> normalize, int64_t num_classes)
    : rec_(rec), normalize_(normalize) {
  const FileBytes bytes = map_file(rec, "RecordIO");
  std::ifstream f(idx, std::ios::binary);
  TR_CHECK(f, "RecordIO index ", idx, ": cannot open it (written beside the .rec by MXNet's MXIndexedRecordIO or ",
           "`trainer pack --recordio`)");
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto entries = parse_record_index(text, idx);
  TR_CHECK(!entries.empty(), "RecordIO index ", idx, ": no records");
  const int64_t N = int64_t(entries.size()), row = numel_of(shape);
  Shape s{N};
  s.insert(s.end(), shape.begin(), shape.end());
  images_ = dataset_storage(s, DType::U8);
  labels_ = dataset_storage({N}, DType::I64);
  uint8_t* pi = images_.data_ptr<uint8_t>();
  int64_t* pl = labels_.data_ptr<int64_t>();
  for (int64_t i = 0; i < N; ++i) {
    const auto [key, off] = entries[size_t(i)];
    const std::string where = str("RecordIO ", rec, ": record ", key, " (at byte ", off, ")");
    int parts = 0;
    const std::vector<uint8_t> payload = read_record(bytes.data, bytes.size, off, rec, &parts);
    multipart_ += parts > 1;
    const ImageRecord r = unpack_image_record(payload, where);
    if (is_encoded_image(r.image, r.image_size)) {  // PNG or JPEG: decoded now, kept as CHW bytes
      TR_CHECK(shape.size() == 3, where, ": an encoded image needs [data] image_shape [C, H, W], got ", shape);
      const DecodedImage img =
          resize_bilinear(decode_image(r.image, r.image_size, int(shape[0]), where), shape[1], shape[2]);
      const int64_t C = shape[0], HW = shape[1] * shape[2];
      for (int64_t c = 0; c < C; ++c)
        for (int64_t k = 0; k < HW; ++k) pi[i * row + c * HW + k] = img.pixels[size_t(k * C + c)];
      ++encoded_;
    } else {
      TR_CHECK(r.image_size == size_t(row), where, ": ", r.image_size,
               " image bytes; a raw u8 image of [data] image_shape ", shape, " has ", row,
               " (and it is no PNG or JPEG)");
      std::memcpy(pi + i * row, r.image, size_t(row));
    }
    const float label = r.labels[0];
    TR_CHECK(std::floor(label) == label && label >= 0 && (num_classes <= 0 || label < float(num_classes)), where,
             ": label ", label, " is no class index",
             num_classes > 0 ? str(" in [0, ", num_classes, ")") : std::string());
    pl[i] = int64_t(label);
  }
}

Example RecordIODataset::get(int64_t i) const {
  Example b = get_batch({i});
  return {b.input.select(0, 0), b.target.select(0, 0)};
}

Example RecordIODataset::get_batch(const std::vector<int64_t>& idx) const {
  Shape shape = images_.sizes();
  shape[0] = int64_t(idx.size());
  const int64_t row = images_.numel() / std::max<int64_t>(size(), 1);
  Tensor x = empty(shape, DType::F32), y = empty({int64_t(idx.size())}, DType::I64);
  for (size_t b = 0; b < idx.size(); ++b) {
    check_index(idx[b]);
    bytes_to_pixels(images_.data_ptr<uint8_t>() + idx[b] * row, x.data_ptr<float>() + int64_t(b) * row, row,
                    normalize_ ? normalize_->mean : 0.0f, normalize_ ? normalize_->std : 1.0f, normalize_.has_value());
    y.data_ptr<int64_t>()[b] = labels_.data_ptr<int64_t>()[idx[b]];
  }
  return {x, y};
}

std::string RecordIODataset::describe() const {
  Shape shape(images_.sizes().begin() + 1, images_.sizes().end());
  return str("RecordIODataset(", size(), " x ", shape, " images (", encoded_, " decoded from PNG or JPEG), '", rec_,
             "', ", multipart_, " multi-part records)");
}

namespace {

DatasetSplits build_recordio(const TomlTable& t, const DatasetContext& ctx) {
  auto rec_path = [&](const char* key) { return resolve_path(t.get_string(key), ctx.config_dir); };
  auto idx_of = [&](const std::string& rec, const char* key) {
    if (t.has(key)) return resolve_path(t.get_string(key), ctx.config_dir);
    const std::string stem =
        rec.size() > 4 && rec.substr(rec.size() - 4) == ".rec" ? rec.substr(0, rec.size() - 4) : rec;
    return stem + ".idx";
  };
  Shape shape = ctx.input_shape;
  if (t.has("image_shape")) {
    const std::vector<int64_t> v = t.get_ints("image_shape");
    shape = Shape(v.begin(), v.end());
  }
  if (shape != ctx.input_shape)
    t.fail("image_shape", str("is ", shape, ", but the model expects per-sample input ", ctx.input_shape));
  DatasetSplits s;
  const std::optional<IdxDataset::Normalize> norm = read_normalize(t, s);
  const int64_t classes = t.get_int("num_classes", 0);
  const std::string train = rec_path("train"), eval = rec_path("eval");
  s.train = std::make_shared<RecordIODataset>(train, idx_of(train, "train_idx"), shape, norm, classes);
  s.eval = std::make_shared<RecordIODataset>(eval, idx_of(eval, "eval_idx"), shape, norm, classes);
  return s;
}

}  // namespace

TR_REGISTER_DATASET("recordio", {build_recordio,
                                 "train, eval (.rec files; their .idx beside them, or train_idx, "
                                 "eval_idx), image_shape (default: the model's input), normalize = "
                                 "[mean, std], num_classes (0: labels unchecked)"});

}  // namespace tr::data
