#include "data/shard_paths.h"
#include <glob.h>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include "core/error.h"
#include "toml/toml_table.h"

namespace tr::data {

namespace fs = std::filesystem;

namespace {

bool is_pattern(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

}  // namespace

std::vector<std::string> glob_paths(const std::string& pattern) {
  glob_t g;
  std::memset(&g, 0, sizeof g);
  const int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  TR_CHECK(rc == 0 || rc == GLOB_NOMATCH, "pattern '", pattern, "': glob failed (",
           rc == GLOB_NOSPACE ? "out of memory" : "read error", ")");
  std::sort(out.begin(), out.end());  // (glob(3) collates by the locale)
  return out;
}

std::vector<std::string> expand_shard_paths(const std::vector<std::string>& entries, const std::string& config_dir) {
  TR_CHECK(!entries.empty(), "is an empty list (expected a token file, a glob or a list of them)");
  std::vector<std::string> files;
  std::map<std::string, std::string> seen;  // canonical path -> the entry that named it
  for (const std::string& e : entries) {
    std::vector<std::string> matched;
    if (!is_pattern(e)) {
      matched.push_back(resolve_path(e, config_dir));
    } else {
      matched = glob_paths(e);
      const bool relative = fs::path(e).is_relative() && !config_dir.empty();
      if (matched.empty() && relative) matched = glob_paths((fs::path(config_dir) / e).string());
      TR_CHECK(!matched.empty(), "pattern '", e, "' matches no file (tried from the working directory",
               relative ? str(" and from the config's directory '", config_dir, "'") : std::string(), ")");
    }
    for (std::string& f : matched) {
      std::error_code ec;
      std::string canon = fs::weakly_canonical(f, ec).string();
      if (ec) canon = f;  // (a file that cannot be opened is named by the reader's error)
      auto [it, fresh] = seen.emplace(canon, e);
      TR_CHECK(fresh, "names '", f, "' twice (by '", it->second, "' and by '", e,
               "'): each shard may be read once an epoch");
      files.push_back(std::move(f));
    }
  }
  return files;
}

}  // namespace tr::data
