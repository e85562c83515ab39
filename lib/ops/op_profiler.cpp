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
#include "ops/registry.h"

namespace tr {

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Table {
  std::mutex mu;
  struct Row {
    int64_t calls = 0;
    double seconds = 0, first = 0;  // the first call apart: it loads kernels and picks algorithms
  };
  std::map<std::string, Row> rows;  // "op dtype device"
  ~Table() {
    std::vector<std::pair<std::string, Row>> v(rows.begin(), rows.end());
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second.seconds > b.second.seconds; });
    double total = 0, first = 0;
    for (auto& r : v) {
      total += r.second.seconds;
      first += r.second.first;
    }
    std::fprintf(stderr,
                 "TR_PROFILE_OPS: %.1f ms in kernels after each op's first call, %.1f ms in first calls (device "
                 "synchronised around each op)\n",
                 total * 1e3, first * 1e3);
    std::fprintf(stderr, "%-44s %9s %11s %7s %9s %11s\n", "op", "calls", "ms", "share", "us/call", "first ms");
    for (auto& [name, r] : v)
      std::fprintf(stderr, "%-44s %9lld %11.2f %6.1f%% %9.1f %11.2f\n", name.c_str(), (long long)r.calls,
                   r.seconds * 1e3, total > 0 ? 100.0 * r.seconds / total : 0.0,
                   r.calls > 1 ? r.seconds * 1e6 / double(r.calls - 1) : 0.0, r.first * 1e3);
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

bool by_shapes() {
  static const bool on = [] {
    const char* e = std::getenv("TR_PROFILE_OPS");
    return e && std::string(e) == "shapes";
  }();
  return on;
}

}  // namespace

bool op_profiling() {
  static const bool on = [] {
    const char* e = std::getenv("TR_PROFILE_OPS");
    return e && *e && std::string(e) != "0";
  }();
  return on;
}

OpTimer::OpTimer(const char* op, DType t, Device d, const std::vector<Tensor>* inputs)
    : op_(op), dtype_(t), device_(d) {
  if (!op_profiling() || depth++ > 0) return;
  if (inputs && by_shapes())
    for (const Tensor& x : *inputs) shapes_ += " " + shape_str(x.sizes()) + (x.is_contiguous() ? "" : "~");
  sync(device_);
  t0_ = now();
}

OpTimer::~OpTimer() {
  if (!op_profiling() || --depth > 0) return;
  sync(device_);
  const double dt = now() - t0_;
  std::lock_guard<std::mutex> g(table().mu);
  auto& r = table().rows[std::string(op_) + " " + dtype_name(dtype_) + " " + device_.str() + shapes_];
  (r.calls++ == 0 ? r.first : r.seconds) += dt;
}

}  // namespace tr
