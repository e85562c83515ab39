// A trainer run with the CUDA emulator's counts (TR_CUDA_EMU_COUNTS, tests/cuda_emu/counters.cpp).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>
#include "integration/cli_harness.h"

namespace it {

// `trainer run <name>.toml --set run.name=<name> <args>` in d on the config text `cfg`: the counts
// file's lines, one per process (rank), or nullopt where the binary writes none (not the emulator).
inline std::optional<std::vector<nlohmann::json>> run_counted(const fs::path& d, const std::string& name,
                                                              const std::string& cfg, const std::string& args) {
  write(d / (name + ".toml"), cfg);
  const fs::path counts = d / (name + ".counts.jsonl");
  Result r = shell(d, "TR_CUDA_EMU_COUNTS='" + counts.string() + "' '" TRAINER_BINARY "' run " + name +
                          ".toml --set run.name=" + name + " " + args);
  INFO(r.out);
  REQUIRE(r.code == 0);
  if (!fs::exists(counts)) return std::nullopt;
  std::vector<nlohmann::json> lines;
  std::ifstream f(counts);
  for (std::string line; std::getline(f, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

}  // namespace it
