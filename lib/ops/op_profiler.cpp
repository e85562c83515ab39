#include "ops/op_profiler.h"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>
#include "core/cuda_hooks.h"

namespace tr {

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Table {
  std::mutex mu;
  std::map<std::string, std::pair<int64_t, double>> rows;  // "op dtype device" -> calls, seconds
  ~Table() {
    std::vector<std::pair<std::string, std::pair<int64_t, double>>> v(rows.begin(), rows.end());
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second.second > b.second.second; });
    double total = 0;
    for (auto& r : v) total += r.second.second;
    std::fprintf(stderr, "TR_PROFILE_OPS: %.1f ms in kernels (device synchronised around each)\n", total * 1e3);
    std::fprintf(stderr, "%-44s %9s %11s %7s\n", "op", "calls", "ms", "share");
    for (auto& [name, r] : v)
      std::fprintf(stderr, "%-44s %9lld %11.2f %6.1f%%\n", name.c_str(), (long long)r.first, r.second * 1e3,
                   total > 0 ? 100.0 * r.second / total : 0.0);
  }
};
Table& table() {
  static Table t;
  return t;
}

thread_local int depth = 0;  // ops run by another op's kernel are counted in that op

void sync(Device d) {
  if (d.is_cuda()) cuda::synchronize(d.index);
}

}  // namespace

bool op_profiling() {
  static const bool on = [] {
    const char* e = std::getenv("TR_PROFILE_OPS");
    return e && *e && std::string(e) != "0";
  }();
  return on;
}

OpTimer::OpTimer(const char* op, DType t, Device d) : op_(op), dtype_(t), device_(d) {
  if (!op_profiling() || depth++ > 0) return;
  sync(device_);
  t0_ = now();
}

OpTimer::~OpTimer() {
  if (!op_profiling() || --depth > 0) return;
  sync(device_);
  const double dt = now() - t0_;
  std::lock_guard<std::mutex> g(table().mu);
  auto& r = table().rows[std::string(op_) + " " + dtype_name(dtype_) + " " + device_.str()];
  r.first += 1;
  r.second += dt;
}

}  // namespace tr
