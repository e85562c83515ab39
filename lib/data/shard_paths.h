// The files a dataset key names when it takes a path, a glob or a list of them ([data] train =
// "fineweb/fineweb_train_*.bin", or ["a.bin", "more/*.bin"]): llm.c ships FineWeb as 100 shards.
#pragma once
#include <string>
#include <vector>

namespace tr::data {

// The paths glob(3) matches for `pattern`, sorted by name in byte order whatever the locale (shard
// 000010 after 000009); none: empty. Throws when glob fails (a read error, out of memory).
std::vector<std::string> glob_paths(const std::string& pattern);

// The entries in the order given, each glob pattern (an entry with * ? or [) replaced by its
// matches sorted by name (byte order). A relative entry is tried from the working directory, then
// from `config_dir` (as toml's resolve_path does for one path). Throws (the message reads after the
// key's name) when a pattern matches nothing, naming it and both places tried, and when one file
// is named twice (by two entries, or by two patterns that both match it).
std::vector<std::string> expand_shard_paths(const std::vector<std::string>& entries, const std::string& config_dir);

}  // namespace tr::data
