// One metrics record (a train or an eval line of metrics.jsonl) as a JSON object whose fields keep
// the order they were added in, each written in the form metrics.jsonl has always used, so that
// the sinks (metrics.jsonl, TensorBoard) and the programs that read the file see the same bytes.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace tr::train {

class MetricsRecord {
 public:
  // Numbers as json_num writes them (%.9g; NaN and the infinities as JSON5's words).
  MetricsRecord& add(const std::string& key, double v);
  MetricsRecord& add(const std::string& key, const std::vector<double>& v);
  MetricsRecord& add(const std::string& key, int64_t v);
  MetricsRecord& add(const std::string& key, int v) { return add(key, int64_t(v)); }
  MetricsRecord& add(const std::string& key, const std::string& v);
  MetricsRecord& add(const std::string& key, const char* v) { return add(key, std::string(v)); }
  // A value written as nlohmann's dump() writes it: the per-rank memory arrays have always been
  // written so (0.0, not 0), and readers of old files compare them.
  MetricsRecord& add_json(const std::string& key, nlohmann::json v);

  // The fields of `other`, after these.
  MetricsRecord& append(const MetricsRecord& other);

  // The record on one line, without the newline: {"split":"train","step":4,...}.
  std::string str() const;

 private:
  using Value = std::variant<double, std::vector<double>, int64_t, std::string, nlohmann::json>;
  std::vector<std::pair<std::string, Value>> fields_;
};

}  // namespace tr::train
