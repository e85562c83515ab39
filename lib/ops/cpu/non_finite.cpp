// _foreach_non_finite on the CPU: every tensor split into runs over the pool, each run summing
// x - x (NaN exactly for an inf or a NaN) with no branch, so the loop vectorises.
#include <algorithm>
#include <atomic>
#include <vector>
#include "ops/cpu/loops.h"
#include "ops/registry.h"

namespace tr::cpu {

namespace {

// sum of (x - x): 0 while every x is finite, NaN once one is not (NaN absorbs every sum)
template <typename T> bool run_non_finite(const T* p, int64_t n) {
  using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;
  acc_t s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) {
    const acc_t v = acc_t(p[i]);
    s += v - v;
  }
  return s != acc_t(0);
}

void non_finite_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  // one pass over the pool for all tensors: chunks of at least kChunk elements, whole tensors below
  constexpr int64_t kChunk = 1 << 15;
  std::vector<Tensor> ts;
  struct Run {
    size_t t;
    int64_t begin, end;
  };
  std::vector<Run> runs;
  for (const Tensor& t0 : in) {
    ts.push_back(t0.contiguous());
    const int64_t n = ts.back().numel();
    for (int64_t b = 0; b < n; b += kChunk) runs.push_back({ts.size() - 1, b, std::min(n, b + kChunk)});
  }
  std::atomic<bool> bad{false};
  parallel_for(int64_t(runs.size()), 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1 && !bad.load(std::memory_order_relaxed); ++r) {
      const Tensor& t = ts[runs[size_t(r)].t];
      TR_DISPATCH_FLOAT(t.dtype(), "_foreach_non_finite", [&] {
        const scalar_t* p = t.data_ptr<scalar_t>() + runs[size_t(r)].begin;
        if (run_non_finite(p, runs[size_t(r)].end - runs[size_t(r)].begin)) bad.store(true, std::memory_order_relaxed);
      });
    }
  });
  *static_cast<bool*>(out[0].raw_data()) = bad.load();
}

}  // namespace

TR_REGISTER_KERNEL(_foreach_non_finite, CPU, non_finite_cpu);

}  // namespace tr::cpu
