#include "train/metrics_record.h"
#include "train/progress.h"

namespace tr::train {

MetricsRecord& MetricsRecord::add(const std::string& key, double v) {
  fields_.emplace_back(key, v);
  return *this;
}

MetricsRecord& MetricsRecord::add(const std::string& key, const std::vector<double>& v) {
  fields_.emplace_back(key, v);
  return *this;
}

MetricsRecord& MetricsRecord::add(const std::string& key, int64_t v) {
  fields_.emplace_back(key, v);
  return *this;
}

MetricsRecord& MetricsRecord::add(const std::string& key, const std::string& v) {
  fields_.emplace_back(key, v);
  return *this;
}

MetricsRecord& MetricsRecord::add_json(const std::string& key, nlohmann::json v) {
  fields_.emplace_back(key, std::move(v));
  return *this;
}

MetricsRecord& MetricsRecord::append(const MetricsRecord& other) {
  fields_.insert(fields_.end(), other.fields_.begin(), other.fields_.end());
  return *this;
}

namespace {

struct ValueText {
  std::string operator()(double v) const { return json_num(v); }
  std::string operator()(const std::vector<double>& v) const {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + json_num(v[i]);
    return s + "]";
  }
  std::string operator()(int64_t v) const { return std::to_string(v); }
  std::string operator()(const std::string& v) const { return nlohmann::json(v).dump(); }
  std::string operator()(const nlohmann::json& v) const { return v.dump(); }
};

}  // namespace

std::string MetricsRecord::str() const {
  std::string s = "{";
  for (const auto& [key, value] : fields_)
    s += (s.size() > 1 ? "," : "") + nlohmann::json(key).dump() + ":" + std::visit(ValueText{}, value);
  return s + "}";
}

}  // namespace tr::train
