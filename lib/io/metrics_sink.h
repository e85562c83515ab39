// Where a run's metrics go: one record (a JSON object on one line) at a time, through a small
// interface so that more sinks (TensorBoard event files, plots) can sit beside metrics.jsonl.
#pragma once
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace tr::io {

// One metrics record as JSON: the NaN, Infinity and -Infinity that lines write for non-finite
// numbers (JSON has no literal for them) come back as those doubles.
nlohmann::json parse_metrics_record(const std::string& line);
// A record's number at `key` (a double, or one of the non-finite words), or NaN when absent.
double metrics_number(const nlohmann::json& v);

class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  // One record: a JSON object without the newline, e.g. {"split":"train","step":4,...}.
  virtual void write(const std::string& record) = 0;
  // Records written so far in this run, those before a resume included (checkpoints save it).
  virtual int64_t records() const = 0;
};

// runs/<name>/metrics.jsonl: one record a line, flushed at once. On ranks other than 0 it only
// counts (no file), so that every rank's count matches rank 0's file.
class JsonlMetricsSink : public MetricsSink {
 public:
  // resumed_records < 0: a new run (the file is truncated); otherwise the file keeps its first
  // resumed_records lines (what the checkpoint saw) and the rest, which the resumed run writes
  // again, is dropped.
  JsonlMetricsSink(std::string path, bool write_file, int64_t resumed_records = -1);
  ~JsonlMetricsSink() override;
  JsonlMetricsSink(const JsonlMetricsSink&) = delete;
  JsonlMetricsSink& operator=(const JsonlMetricsSink&) = delete;

  void write(const std::string& record) override;
  int64_t records() const override { return records_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  int64_t records_ = 0;
};

}  // namespace tr::io
