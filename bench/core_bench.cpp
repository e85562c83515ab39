// core_bench: sgemm GFLOP/s through tr::mm and elementwise / reduction GB/s of the CPU kernels,
// as JSON lines (one per benchmark, median of --reps timed runs after warm-up).
// bench/run_core_bench.sh runs it beside bench/torch_core_bench.py and prints the ratios.
#include <omp.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>
#include "ops/backends.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int reps = 11;
  int threads = 0;   // 0: the OpenMP default (OMP_NUM_THREADS, else all cores)
  bool raw = true;   // also time plain OpenMP loops: what the memory system allows
  std::string only;  // comma-separated benchmark names; empty: all
};

// "reuse" when GLIBC_TUNABLES raises malloc's mmap threshold (freed 64 MiB blocks stay in the heap
// and the next output reuses them), else "default" (every 64 MiB output is a fresh mmap whose pages
// fault in on first write). run_core_bench.sh runs both ways, torch too.
std::string malloc_mode() {
  const char* t = std::getenv("GLIBC_TUNABLES");
  return t && std::strstr(t, "mmap_threshold") ? "reuse" : "default";
}

// Median wall time in seconds of fn over reps runs, after two warm-up runs.
double median_seconds(int reps, const std::function<void()>& fn) {
  fn();
  fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void emit(const char* bench, const std::string& shape, const char* impl, double sec, double value, const char* unit,
          int threads) {
  std::printf(
      "{\"bench\": \"%s\", \"shape\": \"%s\", \"impl\": \"%s\", \"threads\": \"omp=%d (shared with OpenBLAS)\", "
      "\"malloc\": \"%s\", \"median_ms\": %.4f, \"value\": %.3f, \"unit\": \"%s\"}\n",
      bench, shape.c_str(), impl, threads, malloc_mode().c_str(), sec * 1e3, value, unit);
  std::fflush(stdout);
}

bool selected(const Options& o, const char* bench) {
  if (o.only.empty()) return true;
  std::string list = "," + o.only + ",";
  return list.find("," + std::string(bench) + ",") != std::string::npos;
}

volatile float g_sink = 0;  // keeps results observable

void bench_sgemm(const Options& o, int threads) {
  struct S {
    int64_t m, k, n;
  };
  for (S s : {S{1024, 1024, 1024}, S{512, 512, 512}, S{256, 784, 128}}) {
    tr::Tensor a = tr::rand({s.m, s.k}), b = tr::rand({s.k, s.n});
    double sec = median_seconds(o.reps, [&] { g_sink = g_sink + float(tr::mm(a, b).numel()); });
    std::string shape = std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n);
    emit("sgemm", shape, "trainer", sec, 2.0 * double(s.m) * double(s.k) * double(s.n) / sec / 1e9, "GFLOP/s", threads);
  }
}

// Causal attention forward + backward at gpt_char's shape (B 32, T 128, 4 heads of 32), the fused
// op against the composite chain it replaces; GFLOP/s counts the causal products (half of T x T).
void bench_attention(const Options& o, int threads) {
  const int64_t B = 32, T = 128, H = 4, D = 32;
  tr::Tensor qkv = tr::randn({B, T, 3 * H * D}).requires_grad_(true), gy = tr::randn({B, T, H * D});
  const double flops = 3.0 * 2.0 * 2.0 * double(B * H * T) * double(T + 1) / 2.0 * double(D);  // fwd + 2x bwd
  for (bool fused : {true, false}) {
    tr::backends::fusion().enabled = fused;
    double sec = median_seconds(o.reps, [&] {
      tr::attention_qkvpacked(qkv, H, true).backward(gy);
      qkv.zero_grad();
    });
    emit("attention", "32x128x4x32 causal fwd+bwd", fused ? "trainer" : "trainer_composite", sec, flops / sec / 1e9,
         "GFLOP/s", threads);
  }
  tr::backends::fusion().enabled = true;
}

// A CNN block's batch norm + relu + 2x2 max pool at fmnist_cnn's two shapes (batch 64), forward and
// backward timed apart, each as its ops dispatched: the fused batch_norm_relu_max_pool2d and its
// backward against the chain batch_norm -> relu -> max_pool2d and max_pool2d_backward ->
// threshold_backward -> batch_norm_backward. GB/s counts the fused ops' own traffic (x read, the
// pooled output and int64 indices written; x, gy, y, idx read and gx written), so the rows of one
// shape compare as times.
void bench_cnn_block(const Options& o, int threads) {
  struct S {
    int64_t n, c, hw;
  };
  for (S s : {S{64, 32, 28}, S{64, 64, 14}}) {
    const tr::Tensor x = tr::randn({s.n, s.c, s.hw, s.hw}), w = tr::rand({s.c}), b = tr::randn({s.c}) * 0.1;
    const std::string shape =
        std::to_string(s.n) + "x" + std::to_string(s.c) + "x" + std::to_string(s.hw) + "x" + std::to_string(s.hw);
    const double xb = double(x.numel()) * 4, yb = xb / 4;
    const tr::Attrs pool{{"kernel", tr::Pair{2, 2}},
                         {"stride", tr::Pair{2, 2}},
                         {"padding", tr::Pair{0, 0}},
                         {"dilation", tr::Pair{1, 1}}};
    tr::Attrs fused = pool, eps{{"eps", 1e-5}}, pool_back = pool;
    fused.set("eps", 1e-5);
    pool_back.set("input_size", x.sizes());
    std::vector<tr::Tensor> r = tr::dispatch("batch_norm_relu_max_pool2d", {x, w, b}, fused);
    const tr::Tensor gy = tr::randn(r[0].sizes());
    double sec = median_seconds(o.reps, [&] {
      g_sink = g_sink + float(tr::dispatch("batch_norm_relu_max_pool2d", {x, w, b}, fused)[0].numel());
    });
    emit("cnn_block_forward", shape, "trainer", sec, (xb + 3 * yb) / sec / 1e9, "GB/s", threads);
    sec = median_seconds(o.reps, [&] {
      g_sink = g_sink +
               float(tr::dispatch("batch_norm_relu_max_pool2d_backward", {gy, x, w, r[2], r[3], r[0], r[1]}, fused)[0]
                         .numel());
    });
    emit("cnn_block_backward", shape, "trainer", sec, (2 * xb + 4 * yb) / sec / 1e9, "GB/s", threads);
    std::vector<tr::Tensor> bn = tr::dispatch("batch_norm", {x, w, b}, eps);
    const tr::Tensor h = tr::relu(bn[0]);
    sec = median_seconds(o.reps, [&] {
      tr::Tensor y = tr::dispatch("max_pool2d", {tr::relu(tr::dispatch("batch_norm", {x, w, b}, eps)[0])}, pool)[0];
      g_sink = g_sink + float(y.numel());
    });
    emit("cnn_block_forward", shape, "trainer_chain", sec, (xb + 3 * yb) / sec / 1e9, "GB/s", threads);
    sec = median_seconds(o.reps, [&] {
      tr::Tensor gz = tr::threshold_backward(tr::dispatch1("max_pool2d_backward", {gy, r[1]}, pool_back), h, 0.0);
      g_sink = g_sink + float(tr::dispatch("batch_norm_backward", {gz, x, w, bn[1], bn[2]}, eps)[0].numel());
    });
    emit("cnn_block_backward", shape, "trainer_chain", sec, (2 * xb + 4 * yb) / sec / 1e9, "GB/s", threads);
  }
}

// Elementwise and reduction over n floats; GB/s counts bytes read + written once each.
void bench_elementwise(const Options& o, int threads, int64_t n) {
  tr::Tensor a = tr::randn({n}), b = tr::randn({n});
  const std::string shape = std::to_string(n);
  // Heap warm-up: memalign-ed 64 MiB blocks do not refit their freed holes at first, so with
  // "reuse" the heap grows (fresh, faulting pages) for ~10 calls before outputs recycle memory.
  // torch_core_bench.py does the same; in "default" mode this only costs time.
  for (int i = 0; i < 16; ++i) g_sink = g_sink + float((a + b).numel());
  const double fb = double(n) * sizeof(float);
  auto run = [&](const char* name, double bytes, const std::function<tr::Tensor()>& fn) {
    if (!selected(o, name)) return;
    double sec = median_seconds(o.reps, [&] { g_sink = g_sink + float(fn().numel()); });
    emit(name, shape, "trainer", sec, bytes / sec / 1e9, "GB/s", threads);
  };
  run("add", 3 * fb, [&] { return a + b; });
  run("mul_scalar", 2 * fb, [&] { return a * 2.0; });
  run("exp", 2 * fb, [&] { return tr::exp(a); });
  run("relu", 2 * fb, [&] { return tr::relu(a); });
  run("sum", fb, [&] { return tr::sum(a); });
  if (!o.raw) return;

  // Plain OpenMP loops over freshly allocated outputs (as an op allocates its result): the
  // ceiling the library's kernels could reach with this allocator on this machine.
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  auto raw = [&](const char* name, double bytes, const std::function<void(float*)>& body) {
    if (!selected(o, name)) return;
    double sec = median_seconds(o.reps, [&] {
      tr::Tensor out = tr::empty({n});
      body(out.data_ptr<float>());
      g_sink = g_sink + out.data_ptr<float>()[0];
    });
    emit(name, shape, "raw_loop", sec, bytes / sec / 1e9, "GB/s", threads);
  };
  raw("add", 3 * fb, [&](float* po) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) po[i] = pa[i] + pb[i];
  });
  raw("mul_scalar", 2 * fb, [&](float* po) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) po[i] = pa[i] * 2.0f;
  });
  raw("exp", 2 * fb, [&](float* po) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) po[i] = std::exp(pa[i]);
  });
  raw("relu", 2 * fb, [&](float* po) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) po[i] = pa[i] > 0.0f ? pa[i] : 0.0f;
  });
  if (selected(o, "sum")) {
    // 32 float lanes per 4096-element block (vectorises at -O2), blocks summed in double.
    double sec = median_seconds(o.reps, [&] {
      double total = 0.0;
#pragma omp parallel for reduction(+ : total) schedule(static)
      for (int64_t blk = 0; blk < n; blk += 4096) {
        int64_t end = std::min(n, blk + 4096), i = blk;
        float lanes[32] = {};
        for (; i + 32 <= end; i += 32)
          for (int j = 0; j < 32; ++j) lanes[j] += pa[i + j];
        double s = 0.0;
        for (int j = 0; j < 32; ++j) s += lanes[j];
        for (; i < end; ++i) s += pa[i];
        total += s;
      }
      g_sink = g_sink + float(total);
    });
    emit("sum", shape, "raw_loop", sec, fb / sec / 1e9, "GB/s", threads);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int64_t n = int64_t(1) << 24;  // 16M floats, 64 MiB per tensor
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "core_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--reps")
      o.reps = std::stoi(next());
    else if (a == "--threads")
      o.threads = std::stoi(next());
    else if (a == "--only")
      o.only = next();
    else if (a == "--numel")
      n = std::stoll(next());
    else if (a == "--no-raw")
      o.raw = false;
    else {
      std::fprintf(stderr,
                   "usage: core_bench [--reps N] [--threads T] [--only NAME,...] [--numel N] [--no-raw]\n"
                   "  benchmarks: sgemm attention cnn_block add mul_scalar exp relu sum\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  try {
    if (o.threads > 0) omp_set_num_threads(o.threads);
    int threads = omp_get_max_threads();
    if (selected(o, "sgemm")) bench_sgemm(o, threads);
    if (selected(o, "attention")) bench_attention(o, threads);
    if (selected(o, "cnn_block")) bench_cnn_block(o, threads);
    bench_elementwise(o, threads, n);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "core_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
