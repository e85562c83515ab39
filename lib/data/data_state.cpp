#include "data/data_state.h"
#include <map>
#include <vector>
#include "core/error.h"

namespace tr::data {

using nlohmann::json;

namespace {

// file name -> tokens of a token_shards list; false when `state` holds no such list
bool shard_counts(const json& state, std::vector<std::pair<std::string, int64_t>>& out) {
  if (!state.is_object() || !state.contains(kTokenShardsKey) || !state.at(kTokenShardsKey).is_array()) return false;
  for (const json& s : state.at(kTokenShardsKey)) {
    if (!s.is_object() || !s.contains("file") || !s.at("file").is_string() || !s.contains("tokens") ||
        !s.at("tokens").is_number_integer())
      return false;
    out.emplace_back(s.at("file").get<std::string>(), s.at("tokens").get<int64_t>());
  }
  return true;
}

// "a.bin (10 tokens), b.bin (0 tokens)", at most 5 named
std::string some(const std::vector<std::string>& items) {
  std::string r;
  for (size_t i = 0; i < items.size() && i < 5; ++i) r += (i ? ", " : "") + items[i];
  if (items.size() > 5) r += str(" and ", items.size() - 5, " more");
  return r;
}

std::string shard_change(const std::vector<std::pair<std::string, int64_t>>& saved,
                         const std::vector<std::pair<std::string, int64_t>>& now) {
  std::map<std::string, int64_t> before(saved.begin(), saved.end()), after(now.begin(), now.end());
  std::vector<std::string> gone, added, resized;
  for (const auto& [f, n] : saved)
    if (!after.count(f)) gone.push_back(str(f, " (", n, " tokens)"));
  for (const auto& [f, n] : now) {
    auto it = before.find(f);
    if (it == before.end())
      added.push_back(str(f, " (", n, " tokens)"));
    else if (it->second != n)
      resized.push_back(str(f, ": ", it->second, " tokens, now ", n));
  }
  std::string what;
  auto part = [&](const std::vector<std::string>& v, const char* verb) {
    if (v.empty()) return;
    what += str(what.empty() ? "" : "; ", v.size(), v.size() == 1 ? " shard " : " shards ", verb, " (", some(v), ")");
  };
  part(gone, "gone");
  part(added, "added");
  part(resized, "resized");
  if (what.empty()) what = "the same shards in another order";
  return str("the training token shards differ from the checkpoint's (", saved.size(), " shards then, ", now.size(),
             " now): ", what, "; the run would not continue at the same window (to train on these shards, start ",
             "a new run from the checkpoint's weights: [model] init)");
}

}  // namespace

std::string data_state_change(const json& saved, const json& now) {
  std::vector<std::pair<std::string, int64_t>> a, b;
  if (shard_counts(saved, a) && shard_counts(now, b)) return shard_change(a, b);
  return str("the training data gives other statistics than the checkpoint's (the file changed?): checkpoint ",
             saved.dump(), ", now ", now.dump());
}

}  // namespace tr::data
