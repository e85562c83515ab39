// DatasetSplits::state, what the training data was fitted with or is made of (a CSV's
// standardisation and classes, the token shards' names and sizes): checkpoints keep it and a resume
// whose data gives another state is refused, since the run would not continue on the same samples.
#pragma once
#include <string>
#include <nlohmann/json.hpp>

namespace tr::data {

// A token dataset's state: {"token_shards": [{"file": "fineweb_train_000001.bin", "tokens": n}, ...]},
// the training shards in order, by file name (the directory may move) and token count.
inline constexpr const char* kTokenShardsKey = "token_shards";

// What differs between a checkpoint's data state and the run's (saved != now), in words: the
// token shards gone, added, resized or reordered; otherwise both states.
std::string data_state_change(const nlohmann::json& saved, const nlohmann::json& now);

}  // namespace tr::data
