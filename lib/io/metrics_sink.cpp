// JsonlMetricsSink: metrics.jsonl, appended line by line, cut back to a checkpoint's line count on resume.
#include "io/metrics_sink.h"
#include <cerrno>
#include <cstring>
#include <unistd.h>
#include <filesystem>
#include <cmath>
#include <fstream>
#include <regex>
#include "core/error.h"

namespace tr::io {

namespace {

// Keeps the first `lines` lines of a metrics file (what a checkpoint saw) and drops the rest,
// which a resumed run writes again. One truncate(2) at the end of line `lines`: a kill at any
// moment leaves either the old file or the kept lines (rewriting the file could lose them all).
void truncate_lines(const std::string& path, int64_t lines) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  std::string line;
  int64_t keep = 0;
  for (int64_t i = 0; i < lines && std::getline(in, line); ++i) keep += int64_t(line.size()) + 1;
  in.close();
  const int64_t size = int64_t(std::filesystem::file_size(path));
  if (keep > size) keep = size;  // a last line without its newline
  if (keep < size)
    TR_CHECK(::truncate(path.c_str(), off_t(keep)) == 0, "cannot truncate ", path, " to ", lines, " lines");
}

}  // namespace

nlohmann::json parse_metrics_record(const std::string& line) {
  static const std::regex non_finite("([:\\[,])(-?Infinity|NaN)(?=[,\\]}])");
  return nlohmann::json::parse(std::regex_replace(line, non_finite, "$1\"$2\""));
}

double metrics_number(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "Infinity") return INFINITY;
    if (s == "-Infinity") return -INFINITY;
  }
  return NAN;
}

JsonlMetricsSink::JsonlMetricsSink(std::string path, bool write_file, int64_t resumed_records)
    : path_(std::move(path)), records_(resumed_records < 0 ? 0 : resumed_records) {
  if (!write_file) return;
  if (resumed_records >= 0) truncate_lines(path_, resumed_records);
  file_ = std::fopen(path_.c_str(), resumed_records < 0 ? "w" : "a");
  TR_CHECK(file_, "cannot write ", path_);
}

JsonlMetricsSink::~JsonlMetricsSink() {
  if (file_) std::fclose(file_);
}

void JsonlMetricsSink::write(const std::string& record) {
  ++records_;
  if (!file_) return;
  // A line that cannot be written whole (disk full) is cut off again: the file keeps whole records.
  const long at = std::ftell(file_);
  if (std::fputs(record.c_str(), file_) >= 0 && std::fputc('\n', file_) != EOF && std::fflush(file_) == 0) return;
  const int err = errno;
  std::fclose(file_);
  file_ = nullptr;
  if (at >= 0) (void)!::truncate(path_.c_str(), off_t(at));
  throw Error(str("cannot append to ", path_, ": ", std::strerror(err), " (its ", records_ - 1,
                  " earlier records are intact)"));
}

}  // namespace tr::io
