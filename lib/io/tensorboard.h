// TensorBoard event files, torch.utils.tensorboard's SummaryWriter without Python: one file per run,
// runs/<name>/events.out.tfevents.<unix time>.<host>.trainer, in TensorFlow's record format (each
// record: uint64 length, uint32 masked CRC-32C of those 8 bytes, the data, uint32 masked CRC-32C
// of the data; all little-endian) holding Event protos (tensorflow/core/util/event.proto): the
// file_version event first, then summaries of scalars (simple_value), histograms (HistogramProto)
// and text (a string tensor for the text plugin). `tensorboard --logdir runs` shows every run.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tr::io {

// CRC-32C (Castagnoli, reflected, init and xor-out 0xffffffff) through Boost.CRC, and the masked
// form TensorFlow stores: ((c >> 15) | (c << 17)) + 0xa282ead8.
uint32_t crc32c(std::string_view bytes);
uint32_t masked_crc32c(std::string_view bytes);

// One record of TensorFlow's format around `data`.
std::string tf_record(std::string_view data);
// The records of a file in order, stopping at its end or at the first record that is cut short or
// fails a CRC (what a kill during a write leaves); *valid_bytes gets the length of the good prefix.
std::vector<std::string> read_tf_records(const std::string& path, int64_t* valid_bytes = nullptr);

// A histogram summary's numbers (summary.proto's HistogramProto): bucket i counts the values in
// (bucket_limit[i-1], bucket_limit[i]], the first from min.
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit, bucket;
};
// `bins` equal-width buckets over [min, max] of the finite values (non-finite ones are left out).
Histogram histogram_of(const std::vector<double>& values, int bins = 30);

// Encoded Event protos.
std::string event_file_version(double wall_time);
std::string event_scalar(double wall_time, int64_t step, std::string_view tag, float value);
std::string event_histogram(double wall_time, int64_t step, std::string_view tag, const Histogram& h);
std::string event_text(double wall_time, int64_t step, std::string_view tag, std::string_view text);
// An Event's step (0 for one without, as the file_version event).
int64_t event_step(std::string_view event);

class SummaryWriter {
 public:
  using Clock = std::function<double()>;  // wall time in seconds since the epoch
  // A new event file in `dir` (the dir's earlier event files removed: a run started afresh), or,
  // with resume_step >= 0, the dir's existing one kept up to its last event of a step <=
  // resume_step (the rest, which the resumed run writes again, dropped; a torn last record too).
  explicit SummaryWriter(const std::string& dir, int64_t resume_step = -1, Clock clock = {});
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  // torch's names; each event is flushed as it is written
  void add_scalar(std::string_view tag, double value, int64_t step);
  void add_histogram(std::string_view tag, const std::vector<double>& values, int64_t step);
  void add_text(std::string_view tag, std::string_view text, int64_t step);
  // A metrics record ({"split":"train","step":N,...}) as scalars "<split>/<key>" at its step: every
  // number but step and epoch; the lr list as train/lr (one group) or train/lr/<i>.
  void add_record(const std::string& json_record);

  const std::string& path() const { return path_; }

 private:
  void write(const std::string& event);
  std::string path_;
  std::FILE* file_ = nullptr;
  Clock clock_;
};

}  // namespace tr::io
