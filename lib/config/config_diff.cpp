#include "config/config_diff.h"
#include <charconv>
#include <map>
#include <sstream>

namespace tr::config {

namespace {

// Dotted key -> the value printed as TOML; tables are walked, arrays are values.
void flatten(const toml::table& t, const std::string& prefix, std::map<std::string, std::string>& out) {
  for (auto&& [k, v] : t) {
    std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const toml::table* sub = v.as_table()) {
      flatten(*sub, key, out);
      continue;
    }
    if (const auto* d = v.as_floating_point()) {  // the shortest text that reads back (0.1, not 0.10000000000000001)
      char buf[32];
      auto r = std::to_chars(buf, buf + sizeof buf, d->get());
      out[key] = std::string(buf, r.ptr);
      continue;
    }
    std::ostringstream os;
    v.visit([&](auto&& x) { os << x; });
    out[key] = os.str();
  }
}

}  // namespace

bool harmless_change(const std::string& key) {
  static const char* kHarmless[] = {"run.name",         "run.out_dir",        "run.threads",     "run.device",
                                    "data.workers",     "data.eval_batch_size", "train.steps",   "train.epochs",
                                    "train.eval_every", "train.eval_batches", "train.log_every"};
  for (const char* h : kHarmless)
    if (key == h) return true;
  return key.rfind("log.", 0) == 0 || key.rfind("checkpoint.", 0) == 0 || key.rfind("dist.", 0) == 0;
}

std::vector<ConfigChange> diff_configs(const toml::table& saved, const toml::table& now) {
  std::map<std::string, std::string> a, b;
  flatten(saved, "", a);
  flatten(now, "", b);
  std::map<std::string, ConfigChange> changes;
  for (auto& [k, v] : a) {
    auto it = b.find(k);
    std::string after = it == b.end() ? "(absent)" : it->second;
    if (after != v) changes[k] = {k, v, after, harmless_change(k)};
  }
  for (auto& [k, v] : b)
    if (!a.count(k)) changes[k] = {k, "(absent)", v, harmless_change(k)};
  std::vector<ConfigChange> out;
  for (auto& [k, c] : changes) out.push_back(c);
  return out;
}

}  // namespace tr::config
