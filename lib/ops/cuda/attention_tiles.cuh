// What the FlashAttention-2 kernels of attention_qkvpacked share (attention_kernels.cu, the SIMT
// kernels of f32 and f64; attention_mma_kernels.cu, the tensor-core kernels of f16 and bf16): shared
// memory carving, tile loads and stores, a row's reductions over the lanes that hold it, the grid,
// and the head-dim buckets the kernels are compiled for.
#pragma once
#include <type_traits>
#include "ops/attention_math.h"
#include "ops/cuda/loops.cuh"

namespace tr::cuda::flash {

using attn::Geometry;

constexpr size_t kSharedBudget = 48 * 1024;  // static shared memory of a block

constexpr size_t align32(size_t n) { return (n + 31) / 32 * 32; }

// The next shared array of `bytes` at `at` (32-byte aligned, as wmma's loads and stores need).
template <typename P> __device__ __forceinline__ P* carve(unsigned char*& at, size_t bytes) {
  P* p = reinterpret_cast<P*>(at);
  at += align32(bytes);
  return p;
}

// A kernel's tile: `rows` x `cols` scores.
struct TileDims {
  int rows, cols;
};

// Rows [0, n) of one head's slice of global memory (row stride ld elements, D columns) into a
// [R][LD] shared tile; zeros past row n and column D, so that padded products add 0.
template <typename T, int R, int kD, int LD>
__device__ __forceinline__ void load_rows(T* s, const T* src, int64_t ld, int64_t n, int64_t D, int tid, int nt) {
  for (int e = tid; e < R * kD; e += nt) {
    const int r = e / kD, d = e % kD;
    s[r * LD + d] = r < n && d < D ? src[r * ld + d] : T(0.0f);
  }
}

// Max and sum over the TX lanes of a row (contiguous lanes of one warp, TX a power of 2 <= 32);
// every lane gets the same bits.
template <int TX, typename A> __device__ __forceinline__ A lanes_max(A v) {
#pragma unroll
  for (int o = TX / 2; o > 0; o >>= 1) {
    const A w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  return v;
}
template <int TX, typename A> __device__ __forceinline__ A lanes_sum(A v) {
#pragma unroll
  for (int o = TX / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Writes a thread's [RM][DN] head-dim accumulator (rows r0 + a, columns tx + TX c) times `scale`
// into `part` of dqkv (or into y when part < 0), for rows < T and columns < D.
template <int RM, int DN, int TX, typename T, typename A>
__device__ __forceinline__ void store_rows(const Geometry& g, T* out, int part, int64_t b, int64_t h, int64_t r0,
                                           int tx, const A (&acc)[RM][DN], A scale) {
#pragma unroll
  for (int a = 0; a < RM; ++a) {
    const int64_t r = r0 + a;
    if (r >= g.T) continue;
    T* o = out + (part < 0 ? g.y_at(b, r, h) : g.qkv_at(b, r, h, part));
#pragma unroll
    for (int c = 0; c < DN; ++c) {
      const int d = tx + c * TX;
      if (d < g.D) o[d] = T(acc[a][c] * scale);
    }
  }
}

// The backward's per-row statistics of query rows r0 .. r0 + RM - 1: lse and delta = dy . y, 0 past T.
template <int RM, typename A> __device__ __forceinline__ void load_row_stats(const Geometry& g, int64_t b, int64_t h,
                                                                             int64_t r0, const A* lse, const A* delta,
                                                                             A (&row_lse)[RM], A (&row_delta)[RM]) {
#pragma unroll
  for (int a = 0; a < RM; ++a) {
    const bool in = r0 + a < g.T;
    row_lse[a] = in ? lse[g.lse_at(b, h, r0 + a)] : A(0);
    row_delta[a] = in ? delta[g.lse_at(b, h, r0 + a)] : A(0);
  }
}

// A block per (batch, head, tile of `rows` rows): block x = (b H + h) tiles + tile.
inline unsigned blocks_of(const Geometry& g, int rows) { return unsigned(g.B * g.H * ((g.T + rows - 1) / rows)); }
struct BlockTile {
  int64_t b, h, tile;
};
// `reversed`: the last tile first (causal, the query tiles with the most keys start first).
__device__ __forceinline__ BlockTile block_tile(const Geometry& g, int rows, bool reversed) {
  const int64_t tiles = (g.T + rows - 1) / rows, bh = int64_t(blockIdx.x) / tiles, t = int64_t(blockIdx.x) % tiles;
  return {bh / g.H, bh % g.H, reversed ? tiles - 1 - t : t};
}

// f(kD) with kD the smallest head-dim bucket (std::integral_constant) that holds g.D.
template <typename F> void with_head_bucket(const Geometry& g, const char* op, F&& f) {
  TR_CHECK(g.D <= attn::kMaxFlashHeadDim, op, " on CUDA: head dim ", g.D, " is larger than the kernels' ",
           attn::kMaxFlashHeadDim);
  if (g.D <= 32)
    f(std::integral_constant<int, 32>{});
  else if (g.D <= 64)
    f(std::integral_constant<int, 64>{});
  else
    f(std::integral_constant<int, 128>{});
}

}  // namespace tr::cuda::flash
