// How many CUDA devices the trainer binary sees, and a skip with a message when too few.
#pragma once
#include <regex>
#include "integration/cli_harness.h"

namespace it {

// CUDA devices the trainer binary sees ("cuda devices: N" of `trainer info`).
inline int cuda_devices() {
  static const int n = [] {
    Result r = trainer(fs::temp_directory_path(), "info");
    std::smatch m;
    return std::regex_search(r.out, m, std::regex("cuda devices: ([0-9]+)")) ? std::stoi(m[1].str()) : 0;
  }();
  return n;
}

}  // namespace it

#define REQUIRE_CUDA_DEVICES(n)                                                                   \
  do {                                                                                            \
    if (it::cuda_devices() < (n)) {                                                               \
      WARN("needs " << (n) << " CUDA device(s); the trainer binary sees " << it::cuda_devices()); \
      return;                                                                                     \
    }                                                                                             \
  } while (0)
