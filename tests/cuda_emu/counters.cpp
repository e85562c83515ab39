// The emulator's counts (runtime_internal.h: Counter) per NVTX range, and the peak of device
// memory obtained with cudaMalloc, written at exit to the file TR_CUDA_EMU_COUNTS names: one JSON
// line per process, {"pid", "peak_device_bytes", "total": {...}, "ranges": {"forward": {...}, ...}}.
// A range's counts are those made while it was the innermost open range of the calling thread.
// TR_CUDA_EMU_TRACE=1 also prints each count to stderr as it happens (a kernel by its address).
#include <dlfcn.h>
#include <unistd.h>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>
#include "nvtx3/nvToolsExt.h"
#include "runtime_internal.h"

namespace cuda_emu {

namespace {

using Counts = std::array<uint64_t, 4>;  // by Counter
constexpr const char* kNames[4] = {"kernels", "copies", "host_waits", "polls"};

struct State {
  std::mutex mu;
  Counts total{};
  std::map<std::string, Counts> ranges;
  std::map<int, size_t> peak;  // device -> highest bytes in use
};
State& state() {
  static State* s = new State;  // leaked: counts may still arrive from static destructors
  return *s;
}
thread_local std::vector<std::string> open_ranges;

std::string json_counts(const Counts& c) {
  std::string s = "{";
  for (size_t i = 0; i < c.size(); ++i)
    s += (i ? ", \"" : "\"") + std::string(kNames[i]) + "\": " + std::to_string(c[i]);
  return s + "}";
}

void write_counts() {
  const char* path = std::getenv("TR_CUDA_EMU_COUNTS");
  if (!path || !*path) return;
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  size_t peak = 0;
  for (const auto& [dev, bytes] : s.peak) peak = std::max(peak, bytes);
  std::string line = "{\"pid\": " + std::to_string(getpid()) + ", \"peak_device_bytes\": " + std::to_string(peak) +
                     ", \"total\": " + json_counts(s.total) + ", \"ranges\": {";
  bool first = true;
  for (const auto& [name, c] : s.ranges) {
    line += (first ? "\"" : ", \"") + name + "\": " + json_counts(c);
    first = false;
  }
  line += "}}\n";
  if (FILE* f = std::fopen(path, "a")) {
    std::fputs(line.c_str(), f);
    std::fclose(f);
  }
}

[[maybe_unused]] const bool registered = [] {
  std::atexit(write_counts);
  return true;
}();

}  // namespace

void count(Counter c, const void* what) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  ++s.total[size_t(c)];
  if (!open_ranges.empty()) ++s.ranges[open_ranges.back()][size_t(c)];
  static const bool trace = std::getenv("TR_CUDA_EMU_TRACE") != nullptr;
  if (trace) {
    // a kernel as its offset in the object that holds it (`addr2line -f -C -e <binary> <offset>` names it)
    Dl_info info{};
    const uintptr_t off =
        what && dladdr(what, &info) && info.dli_fbase ? uintptr_t(what) - uintptr_t(info.dli_fbase) : uintptr_t(what);
    std::fprintf(stderr, "cuda emulator: %s %s 0x%zx\n", open_ranges.empty() ? "-" : open_ranges.back().c_str(),
                 kNames[size_t(c)], size_t(off));
  }
}

void note_device_bytes(int device, size_t in_use) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  size_t& p = s.peak[device];
  if (in_use > p) p = in_use;
}

}  // namespace cuda_emu

int nvtxRangePushA(const char* message) {
  cuda_emu::open_ranges.emplace_back(message ? message : "");
  return int(cuda_emu::open_ranges.size()) - 1;
}
int nvtxRangePop() {
  if (cuda_emu::open_ranges.empty()) return -1;
  cuda_emu::open_ranges.pop_back();
  return int(cuda_emu::open_ranges.size());
}
