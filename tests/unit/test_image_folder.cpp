// Image decoding and ImageFolderDataset against PIL (tests/fixtures/generators/make_image_fixtures.py): PNG
// (RGB, gray, RGBA) and JPEG decode to PIL's RGB and L pixels exactly; the
// bilinear resize equals torchvision's Resize on a uint8 tensor; ImageFolder's sorted classes and
// files, ToTensor + Normalize, damaged and foreign files named.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include "core/error.h"
#include "data/image_decode.h"
#include "data/image_folder.h"
#include "data/recordio.h"
#include "data/recordio_dataset.h"
#include "unit/temp_dir.h"

namespace test_image_folder {

using namespace tr;
using namespace tr::data;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {
const std::string kDir = TRAINER_FIXTURES_DIR;
std::vector<uint8_t> bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
nlohmann::json fixtures() {
  std::ifstream f(kDir + "/image_fixtures.json");
  return nlohmann::json::parse(f);
}
}  // namespace

TEST_CASE("decode_image: PNG and JPEG give PIL's pixels", "[data][image]") {
  const nlohmann::json ref = fixtures();
  for (const auto& [name, r] : ref.items()) {
    if (name.rfind("resize", 0) == 0) continue;
    INFO(name);
    const std::vector<uint8_t> b = bytes_of(kDir + "/image_folder/" + name);
    const DecodedImage rgb = decode_image(b.data(), b.size(), 3, name);
    CHECK(rgb.width == r["size"][0].get<int64_t>());
    CHECK(rgb.height == r["size"][1].get<int64_t>());
    CHECK(rgb.pixels == r["rgb"].get<std::vector<uint8_t>>());
    // gray: PIL's L, its fixed-point luma of the RGB pixels
    const DecodedImage l = decode_image(b.data(), b.size(), 1, name);
    const auto want = r["l"].get<std::vector<int>>();
    REQUIRE(l.pixels.size() == want.size());
    int worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(int(l.pixels[i]) - want[i]));
    CHECK(worst == 0);
  }
}

TEST_CASE("resize_bilinear: torchvision's Resize of a uint8 image (antialias off)", "[data][image]") {
  const std::vector<uint8_t> b = bytes_of(kDir + "/image_folder/train/cat/a.png");
  const DecodedImage r = resize_bilinear(decode_image(b.data(), b.size(), 3, "a.png"), 4, 3);
  const auto want = fixtures()["resize_a_4x3_chw"].get<std::vector<int>>();  // CHW
  REQUIRE(r.pixels.size() == want.size());
  int worst = 0;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t k = 0; k < 12; ++k)
      worst = std::max(worst, std::abs(int(r.pixels[size_t(k * 3 + c)]) - want[size_t(c * 12 + k)]));
  CHECK(worst == 0);
}

TEST_CASE("ImageFolderDataset: sorted classes and files, ToTensor + Normalize, errors", "[data][image]") {
  ImageFolderDataset::Options o;
  o.root = kDir + "/image_folder/train";
  o.channels = 3;
  o.height = 5;
  o.width = 6;
  o.mean = {0.5f, 0.25f, 0.0f};
  o.std = {0.5f, 0.5f, 1.0f};
  ImageFolderDataset d(o);
  CHECK(d.classes() == std::vector<std::string>{"cat", "dog"});
  REQUIRE(d.size() == 4);
  CHECK(fs::path(d.file(0)).filename() == "a.png");
  CHECK(fs::path(d.file(3)).filename() == "d.PNG");
  const auto rgb = fixtures()["train/cat/a.png"]["rgb"].get<std::vector<int>>();
  Example e = d.get(0);
  CHECK(e.target.item() == 0);
  // channel 1 of pixel (row 2, col 3): (x / 255 - 0.25) / 0.5
  CHECK(e.input.select(0, 1).select(0, 2).select(0, 3).item() ==
        double((float(rgb[(2 * 6 + 3) * 3 + 1]) / 255.0f - 0.25f) / 0.5f));
  Example b = d.get_batch({3, 1});  // b.jpg is 8 x 8: resized to 5 x 6
  CHECK(b.input.sizes() == Shape{2, 3, 5, 6});
  CHECK(b.target.tolist() == std::vector<double>{1, 0});
  // the eval folder with the training classes
  o.root = kDir + "/image_folder/eval";
  o.classes = d.classes();
  CHECK(ImageFolderDataset(o).size() == 2);
  // errors: an extra class, a damaged image, no folder
  TempDir tmp;
  fs::create_directories(tmp.path / "cat");
  fs::create_directories(tmp.path / "bird");
  fs::copy_file(kDir + "/image_folder/train/cat/a.png", tmp.path / "cat/a.png");
  CHECK_THROWS_WITH(ImageFolderDataset(o = {tmp.path.string(), {"cat"}, 3, 5, 6}),
                    Contains("class 'bird' is not among the training folder's classes"));
  fs::remove(tmp.path / "bird");
  std::vector<uint8_t> png = bytes_of(kDir + "/image_folder/train/cat/a.png");
  png.resize(png.size() / 2);
  std::ofstream(tmp.path / "cat/z.png", std::ios::binary)
      .write(reinterpret_cast<const char*>(png.data()), std::streamsize(png.size()));
  ImageFolderDataset cut({tmp.path.string(), {}, 3, 5, 6});
  CHECK_THROWS_WITH(cut.get(1), Contains("z.png") && Contains("a damaged PNG"));
  std::ofstream(tmp.path / "cat/z.png", std::ios::binary) << "not an image";
  CHECK_THROWS_WITH(cut.get(1), Contains("z.png: neither a PNG nor a JPEG"));
  CHECK_THROWS_WITH(ImageFolderDataset({(tmp.path / "nope").string(), {}, 3, 5, 6}), Contains("nope: not a directory"));
}

TEST_CASE("RecordIO records holding PNG and JPEG images decode as the image folder's", "[data][image][recordio]") {
  TempDir tmp;
  std::string rec, idx;
  const char* names[] = {"train/cat/a.png", "train/cat/b.jpg"};
  for (int k = 0; k < 2; ++k) {
    const std::vector<uint8_t> img = bytes_of(kDir + "/image_folder/" + names[k]);
    const std::vector<uint8_t> r = write_record(pack_image_record(float(k), uint64_t(k), img.data(), img.size()));
    idx += str(k, "\t", rec.size(), "\n");
    rec.append(r.begin(), r.end());
  }
  std::ofstream(tmp / "i.rec", std::ios::binary) << rec;
  std::ofstream(tmp / "i.idx") << idx;
  RecordIODataset d(tmp / "i.rec", tmp / "i.idx", {3, 5, 6}, std::nullopt, 2);
  ImageFolderDataset::Options o;
  o.root = kDir + "/image_folder/train";
  o.height = 5;
  o.width = 6;
  ImageFolderDataset f(o);
  for (int64_t k = 0; k < 2; ++k) CHECK(equal(d.get(k).input, f.get(k).input));
  CHECK_THAT(d.describe(), Contains("2 decoded from PNG or JPEG"));
}

}  // namespace test_image_folder
