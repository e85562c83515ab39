// Key-by-key comparison of two resolved run configs, and which differences a resume accepts.
#include "config/config_diff.h"
#include <charconv>
#include <map>
#include <sstream>
#include "optim/optimizer_registry.h"

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
  static const char* kHarmless[] = {"run.name",
                                    "run.out_dir",
                                    "run.threads",
                                    "run.device",
                                    "data.workers",
                                    "data.eval_batch_size",
                                    "data.cache",
                                    "train.steps",
                                    "train.epochs",
                                    "data.tokenizer",
                                    "train.eval_every",
                                    "train.eval_batches",
                                    "train.log_every",
                                    "train.nonfinite",
                                    "run.cudnn_benchmark",
                                    "run.deterministic",
                                    "run.allow_tf32",
                                    "run.fused_ops",
                                    "run.attention",
                                    "model.activation_checkpointing"};  // bit-identical either way
  for (const char* h : kHarmless)
    if (key == h) return true;
  return key.rfind("log.", 0) == 0 || key.rfind("checkpoint.", 0) == 0 || key.rfind("dist.", 0) == 0;
}

namespace {

// Whether the config as written sets `key` (dotted), itself or through a table holding it.
bool sets(const toml::table& source, const std::string& key) {
  const toml::node* n = &source;
  std::stringstream ss(key);
  for (std::string part; std::getline(ss, part, '.');) {
    const toml::table* t = n->as_table();
    if (!t || !(n = t->get(part))) return false;
  }
  return true;
}

// An [optimizer] key of `saved` that the optimizer type, the same in both, does not read.
bool unread_optimizer_key(const std::string& key, const std::map<std::string, std::string>& saved,
                          const std::map<std::string, std::string>& now) {
  const std::string prefix = "optimizer.";
  if (key.rfind(prefix, 0) != 0 || key.find('.', prefix.size()) != std::string::npos) return false;
  auto a = saved.find("optimizer.type"), b = now.find("optimizer.type");
  if (a == saved.end() || b == now.end() || a->second != b->second) return false;
  const std::string type = b->second.size() >= 2 ? b->second.substr(1, b->second.size() - 2) : "";  // unquoted
  const optim::OptimizerType* t = Registry<optim::OptimizerType>::get().find(type);
  const std::string name = key.substr(prefix.size());
  return t && !t->find(name) && name != "type" && name != "groups";
}

}  // namespace

std::vector<ConfigChange> diff_configs(const toml::table& saved, const toml::table& now,
                                       const toml::table* now_source) {
  std::map<std::string, std::string> a, b;
  flatten(saved, "", a);
  flatten(now, "", b);
  std::map<std::string, ConfigChange> changes;
  for (auto& [k, v] : a) {
    auto it = b.find(k);
    if (it == b.end() && now_source && unread_optimizer_key(k, a, b)) continue;
    std::string after = it == b.end() ? "(absent)" : it->second;
    if (after != v) changes[k] = {k, v, after, harmless_change(k)};
  }
  for (auto& [k, v] : b) {
    if (a.count(k) || (now_source && !sets(*now_source, k))) continue;
    changes[k] = {k, "(absent)", v, harmless_change(k)};
  }
  std::vector<ConfigChange> out;
  for (auto& [k, c] : changes) out.push_back(c);
  return out;
}

}  // namespace tr::config
