// TensorBoard event files: CRC-32C against its check value, record framing and CRCs, the events of
// a fixed-clock writer byte for byte against the committed file that TensorBoard's own reader
// validated (tests/fixtures/tensorboard/check_events.py), metrics records as scalars (several
// param groups, NaN), histograms, and the resume cut (no step twice, a torn record dropped).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <filesystem>
#include "io/protobuf_wire.h"
#include "io/tensorboard.h"
#include "temp_dir.h"

namespace test_tensorboard {

using namespace tr;
using namespace tr::io;
namespace fs = std::filesystem;

namespace {

// what a scalar event holds
struct Scalar {
  int64_t step = 0;
  std::string tag;
  float value = 0;
};

// The Summary.Value fields of an event: tag and simple_value (empty tag where there is none).
Scalar scalar_of(const std::string& event) {
  Scalar s;
  s.step = event_step(event);
  pb::Reader e(event);
  while (auto f = e.next()) {
    if (f->field != 5) continue;
    pb::Reader summary(f->bytes);
    while (auto v = summary.next()) {
      pb::Reader value(v->bytes);
      while (auto x = value.next()) {
        if (x->field == 1) s.tag = std::string(x->bytes);
        if (x->field == 2) std::memcpy(&s.value, &x->number, 4);
      }
    }
  }
  return s;
}

std::string event_file_in(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) return e.path().string();
  return "";
}

// The fixture's events: what check_events.py expects in the committed file.
void write_fixture_events(const std::string& dir) {
  double t = 1764000000.0;
  SummaryWriter w(dir, -1, [&t] { return t += 0.25; });
  w.add_text("config", "    [run]\n    seed = 0\n", 0);
  w.add_scalar("train/loss", 2.5, 1);
  w.add_scalar("train/lr", 0.125, 1);
  w.add_scalar("train/loss", 1.75, 2);
  w.add_histogram("weights/layers.1.weight", {-1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 1.0}, 2);
  w.add_record("{\"split\":\"eval\",\"step\":2,\"epoch\":0,\"loss\":1.5,\"accuracy\":0.625}");
}

}  // namespace

TEST_CASE("crc32c: the check value and TensorFlow's mask", "[tensorboard]") {
  CHECK(crc32c("123456789") == 0xE3069283u);
  CHECK(crc32c("") == 0u);
  const uint32_t c = crc32c("123456789");
  CHECK(masked_crc32c("123456789") == ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST_CASE("tf_record: length, masked CRCs and the data, a torn or corrupted record ends the read", "[tensorboard]") {
  const std::string r = tf_record("abc");
  REQUIRE(r.size() == 3 + 16);
  uint64_t n;
  uint32_t len_crc, data_crc;
  std::memcpy(&n, r.data(), 8);
  std::memcpy(&len_crc, r.data() + 8, 4);
  std::memcpy(&data_crc, r.data() + 15, 4);
  CHECK(n == 3);
  CHECK(len_crc == masked_crc32c(r.substr(0, 8)));
  CHECK(r.substr(12, 3) == "abc");
  CHECK(data_crc == masked_crc32c("abc"));
  TempDir d;
  for (const std::string tail : {std::string(), tf_record("tail").substr(0, 9), [] {
                                   std::string bad = tf_record("bad");
                                   bad[12] = 'B';  // the data no longer matches its CRC
                                   return bad;
                                 }()}) {
    std::ofstream(d / "f", std::ios::binary) << tf_record("one") << tf_record("") << tail;
    int64_t valid = -1;
    const auto recs = read_tf_records(d / "f", &valid);
    REQUIRE(recs.size() == 2);
    CHECK(recs[0] == "one");
    CHECK(recs[1].empty());
    CHECK(valid == 19 + 16);
  }
}

TEST_CASE("SummaryWriter: the fixture's events byte for byte (TensorBoard's reader checked the file)",
          "[tensorboard]") {
  TempDir d;
  write_fixture_events(d.path.string());
  const std::string path = event_file_in(d.path);
  REQUIRE(!path.empty());
  CHECK(fs::path(path).filename().string().rfind("events.out.tfevents.1764000000.", 0) == 0);
  const fs::path fixture_path = fs::path(TRAINER_FIXTURES_DIR) / "tensorboard/events.out.tfevents.fixture";
  if (std::getenv("TRAINER_WRITE_TB_FIXTURE")) {  // remake it, then validate it with check_events.py
    fs::create_directories(fixture_path.parent_path());
    fs::copy_file(path, fixture_path, fs::copy_options::overwrite_existing);
    WARN("wrote " << fixture_path);
  }
  const std::string fixture = read_file(fixture_path);
  REQUIRE(!fixture.empty());
  CHECK(read_file(path) == fixture);
  // and what it holds, read back with the decoder
  const auto recs = read_tf_records(path);
  REQUIRE(recs.size() == 8);
  CHECK(recs[0].find("brain.Event:2") != std::string::npos);
  const Scalar loss2 = scalar_of(recs[4]);
  CHECK(loss2.tag == "train/loss");
  CHECK(loss2.step == 2);
  CHECK(loss2.value == 1.75f);
  CHECK(scalar_of(recs[6]).tag == "eval/accuracy");  // a record's numbers in key order
  CHECK(scalar_of(recs[7]).tag == "eval/loss");
}

TEST_CASE("SummaryWriter::add_record: numbers as <split>/<key>, each group's lr, NaN kept", "[tensorboard]") {
  TempDir d;
  {
    SummaryWriter w(d.path.string());
    w.add_record(
        "{\"split\":\"train\",\"step\":7,\"epoch\":1,\"loss\":NaN,\"lr\":[0.1,0.01],\"grad_norm\":Infinity,"
        "\"samples_per_s\":1000}");
    w.add_record("{\"split\":\"train\",\"step\":8,\"epoch\":1,\"loss\":0.5,\"lr\":[0.1]}");
  }
  const auto recs = read_tf_records(event_file_in(d.path));
  std::vector<std::string> tags;
  for (size_t i = 1; i < recs.size(); ++i)
    tags.push_back(scalar_of(recs[i]).tag + "@" + std::to_string(scalar_of(recs[i]).step));
  CHECK(tags == std::vector<std::string>{"train/grad_norm@7", "train/loss@7", "train/lr/0@7", "train/lr/1@7",
                                         "train/samples_per_s@7", "train/loss@8", "train/lr@8"});
  CHECK(std::isinf(scalar_of(recs[1]).value));
  CHECK(std::isnan(scalar_of(recs[2]).value));
  CHECK(scalar_of(recs[4]).value == 0.01f);
}

TEST_CASE("histogram_of: equal-width buckets over the finite values", "[tensorboard]") {
  Histogram h = histogram_of({0, 1, 2, 3, NAN, 4, INFINITY}, 4);
  CHECK(h.num == 5);
  CHECK(h.min == 0);
  CHECK(h.max == 4);
  CHECK(h.sum == 10);
  CHECK(h.sum_squares == 30);
  CHECK(h.bucket_limit == std::vector<double>{1, 2, 3, 4});
  CHECK(h.bucket == std::vector<double>{2, 1, 1, 1});  // (.., 1] holds 0 and 1
  Histogram one = histogram_of({2.5, 2.5}, 30);
  CHECK(one.bucket_limit == std::vector<double>{2.5});
  CHECK(one.bucket == std::vector<double>{2});
  CHECK(histogram_of({NAN}).num == 0);
}

TEST_CASE("SummaryWriter resumed at a step keeps one file and no step twice", "[tensorboard]") {
  TempDir d;
  {
    SummaryWriter w(d.path.string());
    for (int s = 1; s <= 5; ++s) w.add_scalar("train/loss", s, s);
  }
  const std::string path = event_file_in(d.path);
  { std::ofstream(path, std::ios::app | std::ios::binary) << tf_record("torn").substr(0, 10); }  // a kill mid-write
  {
    SummaryWriter w(d.path.string(), 3);
    CHECK(w.path() == path);
    w.add_scalar("train/loss", 40, 4);
  }
  int files = 0;
  for (const auto& e : fs::directory_iterator(d.path)) files += e.path().filename().string().rfind("events.", 0) == 0;
  CHECK(files == 1);
  std::vector<int64_t> steps;
  std::vector<float> values;
  for (const auto& r : read_tf_records(path)) {
    steps.push_back(event_step(r));
    values.push_back(scalar_of(r).value);
  }
  CHECK(steps == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(values.back() == 40.0f);
  // a new run in the same directory starts a new file
  { SummaryWriter w(d.path.string()); }
  CHECK(read_tf_records(event_file_in(d.path)).size() == 1);
}

}  // namespace test_tensorboard
