// The run config: TOML text, then NUL-separated `--set` strings applied to it; the resolved config
// of what loads is written back as TOML.
#include "config/run_config.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parts = tr::fuzz::split_nul(data, size, 5);
  std::vector<std::string> sets(parts.begin() + 1, parts.end());
  tr::fuzz::expect_clean_error([&] {
    tr::config::RunConfig c = tr::config::parse_run_config(parts[0], "fuzz.toml", sets);
    (void)tr::config::to_toml(c);
  });
  return 0;
}
