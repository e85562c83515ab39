#include "distributed/never_joined.h"
#include <cstdint>
#include <nlohmann/json.hpp>
#include "core/error.h"

namespace tr::distributed {

namespace {

struct RankProgress {
  int rank;
  uint64_t issued, pending_tag;
  std::string pending;
};

std::string ranks_phrase(const std::vector<int>& ranks) {
  std::string s = ranks.size() > 1 ? "ranks " : "rank ";
  for (size_t i = 0; i < ranks.size(); ++i) s += str(i ? ", " : "", ranks[i]);
  return s;
}

}  // namespace

std::string describe_never_joined(const std::vector<std::string>& statuses) {
  std::vector<RankProgress> ps;
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (statuses[r].empty()) continue;
    try {
      const nlohmann::json j = nlohmann::json::parse(statuses[r]);
      if (!j.contains("issued")) continue;
      ps.push_back({int(r), j.value("issued", uint64_t(0)), j.value("pending_tag", uint64_t(0)),
                    j.value("pending", std::string())});
    } catch (const std::exception&) {
      // a garbled status tells nothing; the report shows the others
    }
  }
  // the collective the ranks are stuck at: the oldest one any of them waits in
  const RankProgress* oldest = nullptr;
  for (const RankProgress& p : ps)
    if (p.pending_tag && (!oldest || p.pending_tag < oldest->pending_tag)) oldest = &p;
  if (!oldest) return "";
  const uint64_t tag = oldest->pending_tag;
  std::vector<int> waiting, missing;
  std::string behind;
  for (const RankProgress& p : ps) {
    if (p.pending_tag == tag) {
      waiting.push_back(p.rank);
    } else if (p.issued < tag) {
      missing.push_back(p.rank);
      behind += str(behind.empty() ? "; " : ", ", "rank ", p.rank, " issued up to tag ", p.issued);
    }
  }
  const std::string what = str("collective tag ", tag, " (", oldest->pending, ")");
  if (missing.empty())
    return str("every rank that reported issued ", what, "; it has not completed on ", ranks_phrase(waiting),
               " (a GPU or link fault, or a rank's GPU stuck in work queued before it)");
  return str(ranks_phrase(missing), " never joined ", what, ", which ", ranks_phrase(waiting),
             waiting.size() > 1 ? " wait in" : " waits in", behind);
}

}  // namespace tr::distributed
