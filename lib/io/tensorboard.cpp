// SummaryWriter: Event protos (tensorflow/core/util/event.proto, framework/summary.proto) encoded
// with io/protobuf_wire.h and framed as TensorFlow records. The field numbers used:
//   Event          wall_time 1 (double), step 2 (int64), file_version 3 (string), summary 5
//   Summary        value 1 (repeated)
//   Summary.Value  tag 1, simple_value 2 (float), histo 5, tensor 8, metadata 9
//   HistogramProto min 1, max 2, num 3, sum 4, sum_squares 5, bucket_limit 6, bucket 7 (packed doubles)
//   SummaryMetadata plugin_data 1 -> PluginData plugin_name 1
//   TensorProto    dtype 1 (DT_STRING = 7), tensor_shape 2 (empty: a scalar), string_val 8
#include "io/tensorboard.h"
#include <unistd.h>
#include <boost/crc.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include "core/error.h"
#include "io/metrics_sink.h"
#include "io/protobuf_wire.h"

namespace tr::io {

namespace fs = std::filesystem;

uint32_t crc32c(std::string_view bytes) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(bytes.data(), bytes.size());
  return crc.checksum();
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

namespace {

template <typename T> std::string_view le_bytes(const T& v) {
  return {reinterpret_cast<const char*>(&v), sizeof v};  // the targets are little-endian, as the format
}

pb::Writer event_header(double wall_time, int64_t step) {
  pb::Writer e;
  e.fixed64(1, wall_time);
  if (step != 0) e.varint(2, uint64_t(step));
  return e;
}

std::string event_with_value(double wall_time, int64_t step, const pb::Writer& value) {
  pb::Writer summary;
  summary.message(1, value);
  return event_header(wall_time, step).message(5, summary).str();
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool is_event_file(const fs::path& p) { return p.filename().string().rfind("events.out.tfevents.", 0) == 0; }

}  // namespace

std::string tf_record(std::string_view data) {
  const uint64_t n = data.size();
  std::string r;
  r.reserve(data.size() + 16);
  r.append(le_bytes(n));
  const uint32_t len_crc = masked_crc32c(le_bytes(n));
  r.append(le_bytes(len_crc));
  r.append(data);
  const uint32_t data_crc = masked_crc32c(data);
  r.append(le_bytes(data_crc));
  return r;
}

std::vector<std::string> read_tf_records(const std::string& path, int64_t* valid_bytes) {
  std::ifstream f(path, std::ios::binary);
  TR_CHECK(f, "cannot read the event file ", path);
  const std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  size_t at = 0;
  while (all.size() - at >= 12) {
    uint64_t n;
    uint32_t len_crc, data_crc;
    std::memcpy(&n, all.data() + at, 8);
    std::memcpy(&len_crc, all.data() + at + 8, 4);
    if (len_crc != masked_crc32c(std::string_view(all.data() + at, 8)) || n > all.size() - at - 12 ||
        all.size() - at - 12 - n < 4)
      break;
    const std::string_view data(all.data() + at + 12, size_t(n));
    std::memcpy(&data_crc, all.data() + at + 12 + n, 4);
    if (data_crc != masked_crc32c(data)) break;
    records.emplace_back(data);
    at += 16 + size_t(n);
  }
  if (valid_bytes) *valid_bytes = int64_t(at);
  return records;
}

Histogram histogram_of(const std::vector<double>& values, int bins) {
  Histogram h;
  std::vector<double> v;
  v.reserve(values.size());
  for (double x : values)
    if (std::isfinite(x)) v.push_back(x);
  if (v.empty()) return h;
  h.min = *std::min_element(v.begin(), v.end());
  h.max = *std::max_element(v.begin(), v.end());
  h.num = double(v.size());
  for (double x : v) {
    h.sum += x;
    h.sum_squares += x * x;
  }
  if (h.min == h.max) bins = 1;
  const double width = (h.max - h.min) / bins;
  h.bucket.assign(size_t(bins), 0.0);
  for (int i = 0; i < bins; ++i) h.bucket_limit.push_back(i + 1 == bins ? h.max : h.min + width * (i + 1));
  for (double x : v) {
    // the bucket whose right edge is the first >= x (edges computed as above, so x == edge lands left)
    int i = width > 0 ? int((x - h.min) / width) : 0;
    i = std::clamp(i, 0, bins - 1);
    while (i > 0 && x <= h.bucket_limit[size_t(i - 1)]) --i;
    while (i + 1 < bins && x > h.bucket_limit[size_t(i)]) ++i;
    h.bucket[size_t(i)] += 1;
  }
  return h;
}

std::string event_file_version(double wall_time) { return event_header(wall_time, 0).bytes(3, "brain.Event:2").str(); }

std::string event_scalar(double wall_time, int64_t step, std::string_view tag, float value) {
  pb::Writer v;
  v.bytes(1, tag).fixed32(2, value);
  return event_with_value(wall_time, step, v);
}

std::string event_histogram(double wall_time, int64_t step, std::string_view tag, const Histogram& h) {
  pb::Writer histo;
  histo.fixed64(1, h.min).fixed64(2, h.max).fixed64(3, h.num).fixed64(4, h.sum).fixed64(5, h.sum_squares);
  histo.packed_doubles(6, h.bucket_limit).packed_doubles(7, h.bucket);
  pb::Writer v;
  v.bytes(1, tag).message(5, histo);
  return event_with_value(wall_time, step, v);
}

std::string event_text(double wall_time, int64_t step, std::string_view tag, std::string_view text) {
  pb::Writer plugin, metadata, tensor, v;
  plugin.bytes(1, "text");
  metadata.message(1, plugin);
  tensor.varint(1, 7).message(2, pb::Writer()).bytes(8, text);
  v.bytes(1, tag).message(8, tensor).message(9, metadata);
  return event_with_value(wall_time, step, v);
}

int64_t event_step(std::string_view event) {
  pb::Reader r(event);
  while (auto f = r.next())
    if (f->field == 2 && f->type == pb::kVarint) return int64_t(f->number);
  return 0;
}

SummaryWriter::SummaryWriter(const std::string& dir, int64_t resume_step, Clock clock)
    : clock_(clock ? std::move(clock) : Clock(now_seconds)) {
  fs::create_directories(dir);
  std::vector<fs::path> existing;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && is_event_file(e.path())) existing.push_back(e.path());
  std::sort(existing.begin(), existing.end());
  if (resume_step >= 0 && !existing.empty()) {
    // one file per run: the resumed run appends to the newest, cut back to the checkpoint's step
    path_ = existing.back().string();
    int64_t valid = 0;
    const std::vector<std::string> records = read_tf_records(path_, &valid);
    int64_t keep = 0;
    for (const std::string& r : records) {
      if (event_step(r) > resume_step) break;
      keep += int64_t(r.size()) + 16;
    }
    TR_CHECK(::truncate(path_.c_str(), off_t(keep)) == 0, "cannot truncate the event file ", path_, " to step ",
             resume_step);
    file_ = std::fopen(path_.c_str(), "ab");
    TR_CHECK(file_, "cannot append to the event file ", path_);
    if (keep == 0) write(event_file_version(clock_()));
    return;
  }
  for (const fs::path& p : existing) fs::remove(p);
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  const double t0 = clock_();
  path_ = (fs::path(dir) / str("events.out.tfevents.", int64_t(t0), ".", host, ".trainer")).string();
  file_ = std::fopen(path_.c_str(), "wb");
  TR_CHECK(file_, "cannot write the event file ", path_);
  write(event_file_version(t0));
}

SummaryWriter::~SummaryWriter() {
  if (file_) std::fclose(file_);
}

void SummaryWriter::write(const std::string& event) {
  const std::string r = tf_record(event);
  TR_CHECK(std::fwrite(r.data(), 1, r.size(), file_) == r.size() && std::fflush(file_) == 0,
           "cannot write to the event file ", path_);
}

void SummaryWriter::add_scalar(std::string_view tag, double value, int64_t step) {
  write(event_scalar(clock_(), step, tag, float(value)));
}

void SummaryWriter::add_histogram(std::string_view tag, const std::vector<double>& values, int64_t step) {
  write(event_histogram(clock_(), step, tag, histogram_of(values)));
}

void SummaryWriter::add_text(std::string_view tag, std::string_view text, int64_t step) {
  write(event_text(clock_(), step, tag, text));
}

void SummaryWriter::add_record(const std::string& json_record) {
  const nlohmann::json r = parse_metrics_record(json_record);
  const std::string split = r.value("split", "train");
  const int64_t step = r.value("step", int64_t(0));
  for (const auto& [key, v] : r.items()) {
    if (key == "split" || key == "step" || key == "epoch") continue;
    if (v.is_number() || v.is_string()) {
      add_scalar(split + "/" + key, metrics_number(v), step);
    } else if (v.is_array()) {  // the lr of each param group
      for (size_t i = 0; i < v.size(); ++i)
        add_scalar(v.size() == 1 ? split + "/" + key : str(split, "/", key, "/", i), metrics_number(v[i]), step);
    }
  }
}

}  // namespace tr::io
