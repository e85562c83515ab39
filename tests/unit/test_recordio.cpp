// MXNet RecordIO: a file written from MXNet's documented layout by an independent writer
// (tests/fixtures/generators/make_recordio_fixture.py: a multi-part record, a label vector) reads back exactly
// and our writer makes the same bytes; damaged files and indexes are one error naming the file and
// the record; RecordIODataset's pixels and labels equal the IDX reader's.
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include "core/error.h"
#include "data/recordio.h"
#include "data/recordio_dataset.h"
#include "unit/temp_dir.h"

namespace test_recordio {

using namespace tr;
using namespace tr::data;
using Catch::Matchers::Contains;

namespace {
const std::string kDir = TRAINER_FIXTURES_DIR;
std::vector<uint8_t> bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
std::vector<uint8_t> magic() { return {0x0a, 0x23, 0xd7, 0xce}; }
}  // namespace

TEST_CASE("RecordIO: MXNet's layout, a multi-part record and a label vector read back exactly", "[data][recordio]") {
  const std::vector<uint8_t> rec = bytes_of(kDir + "/recordio_fixture.rec");
  std::ifstream fi(kDir + "/recordio_fixture.idx");
  const std::string idx((std::istreambuf_iterator<char>(fi)), std::istreambuf_iterator<char>());
  const auto entries = parse_record_index(idx, "fixture.idx");
  REQUIRE(entries.size() == 3);
  std::vector<uint8_t> ours;
  for (size_t k = 0; k < entries.size(); ++k) {
    int parts = 0;
    const std::vector<uint8_t> payload = read_record(rec.data(), rec.size(), entries[k].second, "fixture.rec", &parts);
    const ImageRecord r = unpack_image_record(payload, "fixture");
    CHECK(r.id == k);
    std::vector<uint8_t> image(r.image, r.image + r.image_size);
    if (k == 0) {
      CHECK(parts == 1);
      CHECK(r.labels == std::vector<float>{3});
      CHECK(image == std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8});
    } else if (k == 1) {
      CHECK(parts == 3);  // split at the two magic words, which the reader puts back
      std::vector<uint8_t> want = magic();
      for (char c : std::string("abcd")) want.push_back(uint8_t(c));
      for (uint8_t b : magic()) want.push_back(b);
      want.push_back('x');
      want.push_back('y');
      CHECK(image == want);
    } else {
      CHECK(r.labels == std::vector<float>{2, 5});
      CHECK(image == std::vector<uint8_t>{9, 10, 11, 12});
    }
    const std::vector<uint8_t> again = write_record(payload);
    ours.insert(ours.end(), again.begin(), again.end());
  }
  CHECK(ours == rec);  // our writer splits and pads as dmlc's
}

TEST_CASE("RecordIO: damaged files and indexes are one error naming the file and the record", "[data][recordio]") {
  const std::vector<uint8_t> rec = bytes_of(kDir + "/recordio_fixture.rec");
  CHECK_THROWS_WITH(read_record(rec.data(), rec.size(), 44, "x.rec"), Contains("x.rec: no record magic at byte 44"));
  CHECK_THROWS_WITH(read_record(rec.data(), rec.size(), 4000, "x.rec"), Contains("runs past the end of the file"));
  CHECK_THROWS_WITH(read_record(rec.data(), 60, 40, "x.rec"), Contains("x.rec") && Contains("cut short"));
  CHECK_THROWS_WITH(parse_record_index("0\t0\n1 40\n", "x.idx"), Contains("x.idx: line 2 is '1 40'"));
  CHECK_THROWS_WITH(unpack_image_record(std::vector<uint8_t>(10), "x.rec: record 3"),
                    Contains("x.rec: record 3: 10 bytes is shorter than MXNet's 24-byte IRHeader"));
  TempDir tmp;
  // a label outside the classes, and an image of the wrong size
  std::ofstream(tmp / "l.idx") << "0\t0\n";
  const std::vector<uint8_t> img(4, 7), r = write_record(pack_image_record(12.0f, 0, img.data(), 4));
  std::ofstream(tmp / "l.rec", std::ios::binary)
      .write(reinterpret_cast<const char*>(r.data()), std::streamsize(r.size()));
  CHECK_THROWS_WITH(RecordIODataset(tmp / "l.rec", tmp / "l.idx", {1, 2, 2}, std::nullopt, 10),
                    Contains("l.rec: record 0 (at byte 0): label 12 is no class index in [0, 10)"));
  CHECK_THROWS_WITH(RecordIODataset(tmp / "l.rec", tmp / "l.idx", {1, 3, 3}, std::nullopt, 0),
                    Contains("4 image bytes; a raw u8 image of [data] image_shape [1, 3, 3] has 9"));
  CHECK_THROWS_WITH(RecordIODataset(tmp / "l.rec", tmp / "none.idx", {1, 2, 2}, std::nullopt, 0), Contains("none.idx"));
  RecordIODataset ok(tmp / "l.rec", tmp / "l.idx", {1, 2, 2}, IdxDataset::Normalize{0.5f, 0.25f}, 0);
  Example e = ok.get(0);
  CHECK(e.target.item() == 12);
  CHECK(e.input.select(0, 0).select(0, 1).select(0, 0).item() == double((7.0f / 255.0f - 0.5f) / 0.25f));
}

TEST_CASE("RecordIO: all 60,000 Fashion-MNIST training images round-trip exactly", "[data][recordio]") {
  const IdxDataset idx = IdxDataset::fashion_mnist(true);
  TempDir tmp;
  {
    RecordIOWriter w(tmp / "f.rec", tmp / "f.idx");
    const Tensor images = idx.images().contiguous();
    for (int64_t i = 0; i < idx.size(); ++i)
      w.write(uint64_t(i), pack_image_record(float(idx.labels().data_ptr<int64_t>()[i]), uint64_t(i),
                                             images.data_ptr<uint8_t>() + i * 784, 784));
    w.close();
  }
  RecordIODataset rio(tmp / "f.rec", tmp / "f.idx", {1, 28, 28}, std::nullopt, 10);
  REQUIRE(rio.size() == 60000);
  for (int64_t b = 0; b < 60000; b += 6000) {
    std::vector<int64_t> ids;
    for (int64_t i = b; i < b + 6000; ++i) ids.push_back(i);
    Example x = rio.get_batch(ids), y = idx.get_batch(ids);
    REQUIRE(equal(x.input, y.input));
    REQUIRE(equal(x.target, y.target));
  }
}

}  // namespace test_recordio
