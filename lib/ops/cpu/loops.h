// CPU loop engine: parallel_for on the one OpenMP pool, and a broadcasting, strided,
// N-ary elementwise loop with a flat fast path that the compiler vectorises.
#pragma once
#include <omp.h>
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#include "core/tensor.h"
#include "core/convert.h"

namespace tr::cpu {

constexpr int64_t kGrain = 32768;  // elements below which a loop stays on one thread
// Chunks per thread of a parallel_for. Thread t owns a contiguous run of chunks and works through
// it from the front (the locality of a static schedule: streaming kernels lose ~30% when
// neighbouring chunks alternate between threads); a thread that finishes takes chunks from the
// back of the others' runs. On a shared machine a pool thread is often descheduled for a while:
// with one static chunk per thread the others would spin at the closing barrier until it returns
// (libgomp spins ~300k iterations before sleeping); here they take over its remaining chunks.
constexpr int kChunksPerThread = 4;

namespace detail {
// A run of chunk indices [front, back) that its owner takes from the front and others from the
// back, packed into one atomic word.
struct alignas(64) ChunkRun {
  std::atomic<uint64_t> bounds{0};
  void set(uint32_t front, uint32_t back) { bounds.store(uint64_t(back) << 32 | front, std::memory_order_relaxed); }
  // The taken chunk, or -1 when the run is empty.
  int64_t take(bool from_front) {
    uint64_t old = bounds.load(std::memory_order_relaxed);
    while (true) {
      uint32_t front = uint32_t(old), back = uint32_t(old >> 32);
      if (front >= back) return -1;
      uint64_t next = from_front ? (uint64_t(back) << 32 | (front + 1)) : (uint64_t(back - 1) << 32 | front);
      if (bounds.compare_exchange_weak(old, next, std::memory_order_relaxed)) return from_front ? front : back - 1;
    }
  }
};
}  // namespace detail

// f(begin, end) over [0, n) in chunks of at least `grain` (n < 2 grain: one call on this thread),
// spread over the OpenMP pool. Chunk boundaries depend on the pool size: kernels whose result
// depends on how the range is cut must not use them as summation boundaries.
template <typename F> void parallel_for(int64_t n, int64_t grain, const F& f) {
  if (n <= 0) return;
  const int nt = omp_get_max_threads();
  const int64_t chunks = std::min<int64_t>(int64_t(nt) * kChunksPerThread, n / std::max<int64_t>(grain, 1));
  if (chunks <= 1 || nt <= 1 || omp_in_parallel()) {
    f(int64_t(0), n);
    return;
  }
  const int T = int(std::min<int64_t>(nt, chunks));
  std::vector<detail::ChunkRun> runs(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) runs[size_t(t)].set(uint32_t(chunks * t / T), uint32_t(chunks * (t + 1) / T));
#pragma omp parallel num_threads(T)
  {
    const int t = omp_get_thread_num();
    // own run from the front (k = 0), then the others' runs from the back (with a smaller team
    // than T, also the runs nobody owns)
    for (int k = 0; k < T; ++k)
      for (int64_t c; (c = runs[size_t((t + k) % T)].take(k == 0)) >= 0;) f(n * c / chunks, n * (c + 1) / chunks);
  }
}

// f(begin, end) over [0, n) in about one contiguous run per thread (at least min_grain items a
// run): for kernels that sweep every row over a run of columns with accumulators per column, where
// longer runs read longer pieces of each row.
template <typename F> void parallel_runs(int64_t n, int64_t min_grain, const F& f) {
  const int64_t nt = omp_in_parallel() ? 1 : omp_get_max_threads();
  parallel_for(n, std::max<int64_t>({int64_t(1), n / nt, min_grain}), f);
}

// Strides of `t` (in elements) when broadcast to `shape` (0 on broadcast dims).
Shape broadcast_strides(const Tensor& t, const Shape& shape);

// Geometry shared by the operands of an elementwise loop, with adjacent dims merged
// where every operand allows it.
template <int N> struct LoopGeometry {
  int ndim = 0;
  int64_t sizes[16];
  int64_t strides[N][16];  // elements; operand 0 is the output
  void build(const Shape& shape, const std::array<Shape, N>& st) {
    ndim = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      if (ndim > 0) {
        bool merge = true;
        for (int k = 0; k < N; ++k)
          if (strides[k][ndim - 1] != st[k][d] * shape[d]) merge = false;
        if (merge) {
          sizes[ndim - 1] *= shape[d];
          for (int k = 0; k < N; ++k) strides[k][ndim - 1] = st[k][d];
          continue;
        }
      }
      TR_CHECK(ndim < 16, "elementwise loop: more than 16 dims");
      sizes[ndim] = shape[d];
      for (int k = 0; k < N; ++k) strides[k][ndim] = st[k][d];
      ++ndim;
    }
    if (ndim == 0) {
      ndim = 1;
      sizes[0] = 1;
      for (int k = 0; k < N; ++k) strides[k][0] = 1;
    }
  }
};

// Sources of the flat loop: a contiguous input, or a one-element input read once.
template <typename T> struct DenseSrc {
  const T* p;
  T operator[](int64_t i) const { return p[i]; }
};
template <typename T> struct ScalarSrc {
  T v;
  T operator[](int64_t) const { return v; }
};

template <typename Out, typename Op, typename... Srcs>
void flat_loop(Out* o, int64_t n, const Op& op, const Srcs&... src) {
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) o[i] = op(src[i]...);
  });
}

// Picks DenseSrc or ScalarSrc for input K, then recurses; the loop body is instantiated per
// pattern so that every pattern vectorises.
template <typename Out, typename Op, size_t K, typename InsTuple, size_t NI, typename... Done>
void flat_dispatch(Out* o, int64_t n, const Op& op, const std::array<char*, NI>& base,
                   const std::array<bool, NI>& scalar, const Done&... done) {
  if constexpr (K == NI) {
    flat_loop(o, n, op, done...);
  } else {
    using T = std::tuple_element_t<K, InsTuple>;
    const T* p = reinterpret_cast<const T*>(base[K]);
    if (scalar[K])
      flat_dispatch<Out, Op, K + 1, InsTuple>(o, n, op, base, scalar, done..., ScalarSrc<T>{*p});
    else
      flat_dispatch<Out, Op, K + 1, InsTuple>(o, n, op, base, scalar, done..., DenseSrc<T>{p});
  }
}

// One row of the strided loop where the output and every input have stride 1 or 0 (broadcast)
// along the row: the flat loop's sources, so the row vectorises (x [N, C, H, W] + b [1, C, 1, 1]).
template <typename Out, typename Op, size_t K, typename PtrTuple, typename... Done>
void unit_row(Out* o, int64_t n, const Op& op, const PtrTuple& p, const bool* bcast, const Done&... done) {
  if constexpr (K == std::tuple_size_v<PtrTuple>) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = op(done[i]...);
  } else {
    using T = std::remove_const_t<std::remove_pointer_t<std::tuple_element_t<K, PtrTuple>>>;
    const T* q = std::get<K>(p);
    if (bcast[K])
      unit_row<Out, Op, K + 1>(o, n, op, p, bcast, done..., ScalarSrc<T>{*q});
    else
      unit_row<Out, Op, K + 1>(o, n, op, p, bcast, done..., DenseSrc<T>{q});
  }
}

// Whether a loop over these operand types gets the vectorised variants (the flat loop's and the
// unit rows', 2^inputs of each): when any operand is a float. Loops over integers and bools alone
// (indices, masks, counts: short) take the strided loop, which gives the same values; without their
// variants pointwise.cpp compiled in 183 s instead of 248 s (the same place in a contended build).
template <typename Out, typename... Ins> constexpr bool kVectorisedLoops = is_floating(dtype_of<Out>::value) ||
                                                                           (is_floating(dtype_of<Ins>::value) || ...);

// out[i] = op(in0[i], in1[i], ...) with broadcasting; out may be strided (copy_ into a view).
template <typename Out, typename... Ins, typename Op>
void elementwise(const Tensor& out, const std::array<Tensor, sizeof...(Ins)>& ins, const Op& op) {
  constexpr int N = 1 + sizeof...(Ins);
  constexpr size_t NI = sizeof...(Ins);
  constexpr bool vectorised = kVectorisedLoops<Out, Ins...>;
  const Shape& shape = out.sizes();
  int64_t n = out.numel();
  if (n == 0) return;
  Out* o = static_cast<Out*>(out.raw_data());
  std::array<char*, NI> base{};
  std::array<bool, NI> scalar{};
  for (size_t k = 0; k < NI; ++k) base[k] = static_cast<char*>(ins[k].raw_data());

  // Flat path: a contiguous output, and inputs that are contiguous of the same shape or single elements.
  bool flat = vectorised && out.is_contiguous();
  for (size_t k = 0; k < NI && flat; ++k) {
    scalar[k] = ins[k].numel() == 1;
    flat = scalar[k] || (ins[k].sizes() == shape && ins[k].is_contiguous());
  }
  if constexpr (vectorised) {
    if (flat) {
      flat_dispatch<Out, Op, 0, std::tuple<Ins...>>(o, n, op, base, scalar);
      return;
    }
  }

  std::array<Shape, N> st;
  st[0] = out.strides();
  for (size_t k = 0; k < NI; ++k) st[k + 1] = broadcast_strides(ins[k], shape);
  LoopGeometry<N> g;
  g.build(shape, st);
  const int nd = g.ndim;
  const int64_t inner = g.sizes[nd - 1];
  // Work is split on the linear index, so a single long row also spreads across threads.
  auto run_range = [&]<size_t... I>(std::index_sequence<I...>, int64_t b, int64_t e) {
    int64_t idx[16] = {0};
    int64_t r = b / inner, c = b % inner;
    for (int d = nd - 2; d >= 0; --d) {
      idx[d] = r % g.sizes[d];
      r /= g.sizes[d];
    }
    const int64_t so = g.strides[0][nd - 1];
    [[maybe_unused]] const int64_t si[] = {g.strides[I + 1][nd - 1]...};
    [[maybe_unused]] const bool bcast[] = {si[I] == 0 ...};
    [[maybe_unused]] const bool unit = so == 1 && ((si[I] == 0 || si[I] == 1) && ...);
    int64_t left = e - b;
    while (left > 0) {
      int64_t cnt = std::min(inner - c, left);
      int64_t off[N] = {0};
      for (int d = 0; d < nd - 1; ++d)
        for (int k = 0; k < N; ++k) off[k] += idx[d] * g.strides[k][d];
      Out* po = o + off[0] + c * so;
      std::tuple<const Ins*...> p{reinterpret_cast<const Ins*>(base[I]) + off[I + 1] + c * si[I]...};
      if constexpr (vectorised) {
        if (unit)
          unit_row<Out, Op, 0>(po, cnt, op, p, bcast);
        else
          for (int64_t i = 0; i < cnt; ++i) po[i * so] = op(std::get<I>(p)[i * si[I]]...);
      } else {
        for (int64_t i = 0; i < cnt; ++i) po[i * so] = op(std::get<I>(p)[i * si[I]]...);
      }
      left -= cnt;
      c = 0;
      for (int d = nd - 2; d >= 0; --d) {
        if (++idx[d] < g.sizes[d]) break;
        idx[d] = 0;
      }
    }
  };
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) { run_range(std::index_sequence_for<Ins...>{}, b, e); });
}

}  // namespace tr::cpu
