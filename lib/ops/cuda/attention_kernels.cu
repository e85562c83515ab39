// CUDA kernels of attention_qkvpacked and its backward: FlashAttention-2 (Dao, 2023) over the tile
// rules and the online softmax of ops/attention_math.h. No T x T tensor exists in global memory.
//   forward: one block per (batch, head, tile of Br query rows). The Q tile stays in shared memory
//     while tiles of Bc keys and values pass through it; scores, probabilities and the output are
//     accumulated in A (f32 for f32, bf16 and f16; f64 for f64) and lse is saved. Causal: key tiles
//     wholly past the tile's last row are never loaded, the diagonal ones are masked.
//   backward: D_i = dy_i . y_i (a warp per row); then dk and dv, one block per key tile over the
//     query tiles that see it, and dq, one block per query tile over the key tiles it sees, both
//     recomputing p from lse. FlashAttention-2 adds dq with atomics from the dk/dv blocks instead;
//     two kernels give every output element one writer, so the result does not depend on scheduling.
// This file: the SIMT kernels of f32 and f64 and the entry points; f16 and bf16 take the tensor-core
// kernels of attention_mma_kernels.cu (same tiles and steps, the products in wmma fragments).
// A block is TY x TX threads (1-D, thread = ty TX + tx). Thread (ty, tx) owns rows ty RM + a (a < RM)
// of its block's tile and columns tx + TX b (b < CN) of a score tile or of the head dim: strided
// columns, so that the TX lanes of a row read TX different shared-memory banks (the tiles' rows are
// padded to that end). A row's TX lanes are contiguous lanes of one warp and reduce its max and sum
// by butterfly shuffles (attention_tiles.cuh).
#include "ops/cuda/attention_mma.h"
#include "ops/cuda/attention_tiles.cuh"

namespace tr::cuda {

namespace {

using namespace flash;

// Elements of a shared head-dim row: kD plus one, so that the same column of consecutive rows,
// which the TX lanes of a row of threads read at once, falls in different banks.
template <typename T> constexpr int row_stride(int kD) { return kD + 1; }

// Threads along a tile's rows and columns (the columns' lanes of a row stay in one warp).
constexpr int threads_along(int n) { return n < 16 ? n : 16; }

// Shared memory of each kernel for a tile of `rows` x `cols` scores (forward and dq: query rows x
// key columns; dk/dv: key rows x query columns).
enum class Kernel { Forward, KeyValue, Query };
template <typename T, typename A> constexpr size_t shared_bytes(Kernel k, int kD, int rows, int cols) {
  const size_t ld = size_t(row_stride<T>(kD)), st = sizeof(T), sa = sizeof(A);
  const size_t heads_rows = align32(rows * ld * st), heads_cols = align32(cols * ld * st);
  const size_t scores = align32(size_t(rows) * (cols + 1) * sa);
  switch (k) {
    case Kernel::Forward:  // q; k, v; p
      return heads_rows + 2 * heads_cols + scores;
    case Kernel::KeyValue:  // k, v; q, dy; p, ds; lse, D
      return 2 * heads_rows + 2 * heads_cols + 2 * scores + 2 * align32(cols * sa);
    case Kernel::Query:  // q, dy; k, v; ds
      return 2 * heads_rows + 2 * heads_cols + scores;
  }
  return 0;
}

// The tile of a kernel: the largest of these whose shared memory fits the budget.
constexpr TileDims kTileChoices[] = {{64, 64}, {64, 32}, {32, 32}, {32, 16}, {16, 16}, {16, 8}, {8, 8}};
template <typename T, typename A, int kD, Kernel K> constexpr TileDims pick_tile() {
  for (TileDims t : kTileChoices)
    if (shared_bytes<T, A>(K, kD, t.rows, t.cols) <= kSharedBudget) return t;
  return {0, 0};  // rejected by the kernel's static_assert
}

// acc[a][b] += S_{d < K} x[a lx + d] y[b TX ly + d]: x at the thread's first row, y at its first
// column's row (scores: rows of q against rows of k, both along the head dim).
template <int RM, int CN, int TX, int K, typename A, typename X, typename Y>
__device__ __forceinline__ void product_nt(A (&acc)[RM][CN], const X* x, int lx, const Y* y, int ly) {
#pragma unroll 4
  for (int d = 0; d < K; ++d) {
    A xa[RM], yb[CN];
#pragma unroll
    for (int a = 0; a < RM; ++a) xa[a] = A(x[a * lx + d]);
#pragma unroll
    for (int b = 0; b < CN; ++b) yb[b] = A(y[b * TX * ly + d]);
#pragma unroll
    for (int a = 0; a < RM; ++a)
#pragma unroll
      for (int b = 0; b < CN; ++b) acc[a][b] += xa[a] * yb[b];
  }
}

// acc[a][b] += S_{k < K} p[a lp + k] z[k lz + b TX]: p at the thread's first row of a score tile,
// z at its first column of a head-dim tile (p v, ds k, ds^T q, p^T dy).
template <int RM, int DN, int TX, int K, typename A, typename P, typename Z>
__device__ __forceinline__ void product_nn(A (&acc)[RM][DN], const P* p, int lp, const Z* z, int lz) {
#pragma unroll 4
  for (int k = 0; k < K; ++k) {
    A pa[RM], zb[DN];
#pragma unroll
    for (int a = 0; a < RM; ++a) pa[a] = A(p[a * lp + k]);
#pragma unroll
    for (int b = 0; b < DN; ++b) zb[b] = A(z[k * lz + b * TX]);
#pragma unroll
    for (int a = 0; a < RM; ++a)
#pragma unroll
      for (int b = 0; b < DN; ++b) acc[a][b] += pa[a] * zb[b];
  }
}

// ---- forward: block = (b, h, tile of Br query rows), Bc keys a step ----
template <typename T, typename A, int kD, int Br, int Bc>
__global__ void flash_forward_kernel(Geometry g, const T* qkv, T* y, A* lse) {
  constexpr int TY = threads_along(Br), TX = threads_along(Bc), NT = TY * TX;
  constexpr int RM = Br / TY, CN = Bc / TX, DN = kD / TX, LD = row_stride<T>(kD), LP = Bc + 1;
  constexpr size_t kBytes = shared_bytes<T, A>(Kernel::Forward, kD, Br, Bc);
  static_assert(Br > 0 && kBytes <= kSharedBudget && kD % TX == 0, "flash forward: tiles do not fit");
  __shared__ __align__(16) unsigned char smem[kBytes];
  unsigned char* at = smem;
  T* q_s = carve<T>(at, Br * LD * sizeof(T));
  T* k_s = carve<T>(at, Bc * LD * sizeof(T));
  T* v_s = carve<T>(at, Bc * LD * sizeof(T));
  A* p_s = carve<A>(at, Br * LP * sizeof(A));

  const int tid = int(threadIdx.x), ty = tid / TX, tx = tid % TX;
  const BlockTile bt = block_tile(g, Br, true);
  const int64_t b = bt.b, h = bt.h, i0 = bt.tile * Br, ld = 3 * g.C(), r0 = i0 + ty * RM;
  load_rows<T, Br, kD, LD>(q_s, qkv + g.qkv_at(b, i0, h, 0), ld, g.T - i0, g.D, tid, NT);

  const A scale = A(g.scale);
  A o[RM][DN] = {};
  attn::OnlineSoftmax<A> row[RM];
  const int64_t keys = g.tile_keys_end(i0, Br);
  for (int64_t j0 = 0; j0 < keys; j0 += Bc) {
    __syncthreads();  // the previous step's k, v and p are read
    load_rows<T, Bc, kD, LD>(k_s, qkv + g.qkv_at(b, j0, h, 1), ld, g.T - j0, g.D, tid, NT);
    load_rows<T, Bc, kD, LD>(v_s, qkv + g.qkv_at(b, j0, h, 2), ld, g.T - j0, g.D, tid, NT);
    __syncthreads();
    A s[RM][CN] = {};
    product_nt<RM, CN, TX, kD>(s, q_s + ty * RM * LD, LD, k_s + tx * LD, LD);
#pragma unroll
    for (int a = 0; a < RM; ++a) {
      A mt = A(-INFINITY);
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        s[a][c] = g.visible(r0 + a, j0 + tx + c * TX) ? scale * s[a][c] : A(-INFINITY);
        mt = s[a][c] > mt ? s[a][c] : mt;
      }
      const A alpha = row[a].enter(lanes_max<TX>(mt));
      A sum = A(0);
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        const A p = row[a].p(s[a][c]);
        sum += p;
        p_s[(ty * RM + a) * LP + tx + c * TX] = p;
      }
      row[a].add(lanes_sum<TX>(sum));
#pragma unroll
      for (int c = 0; c < DN; ++c) o[a][c] *= alpha;
    }
    __syncthreads();
    product_nn<RM, DN, TX, Bc>(o, p_s + ty * RM * LP, LP, v_s + tx, LD);
  }
#pragma unroll
  for (int a = 0; a < RM; ++a) {
    if (r0 + a >= g.T) continue;
    const A inv = A(1) / row[a].l;
#pragma unroll
    for (int c = 0; c < DN; ++c) o[a][c] *= inv;
    if (tx == 0) lse[g.lse_at(b, h, r0 + a)] = row[a].lse();
  }
  store_rows<RM, DN, TX>(g, y, -1, b, h, r0, tx, o, A(1));
}

// ---- backward ----
// delta[b, h, i] = dy_i . y_i, a warp per row.
template <typename T, typename A> __global__ void flash_delta_kernel(Geometry g, const T* dy, const T* y, A* delta) {
  const int lane = int(threadIdx.x) % 32;
  const int64_t rows = g.B * g.H * g.T, warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
    const int64_t i = r % g.T, bh = r / g.T, at = g.y_at(bh / g.H, i, bh % g.H);
    A s = A(0);
    for (int64_t d = lane; d < g.D; d += 32) s += A(dy[at + d]) * A(y[at + d]);
    s = lanes_sum<32>(s);
    if (lane == 0) delta[r] = s;
  }
}

// dk and dv: block = (b, h, tile of Bk keys), Bq query rows a step (key rows x query columns).
template <typename T, typename A, int kD, int Bk, int Bq>
__global__ void flash_backward_kv_kernel(Geometry g, const T* dy, const T* qkv, const A* lse, const A* delta, T* dqkv) {
  constexpr int TY = threads_along(Bk), TX = threads_along(Bq), NT = TY * TX;
  constexpr int RM = Bk / TY, CN = Bq / TX, DN = kD / TX, LD = row_stride<T>(kD), LP = Bq + 1;
  constexpr size_t kBytes = shared_bytes<T, A>(Kernel::KeyValue, kD, Bk, Bq);
  static_assert(Bk > 0 && kBytes <= kSharedBudget && kD % TX == 0, "flash dk/dv: tiles do not fit");
  __shared__ __align__(16) unsigned char smem[kBytes];
  unsigned char* at = smem;
  T* k_s = carve<T>(at, Bk * LD * sizeof(T));
  T* v_s = carve<T>(at, Bk * LD * sizeof(T));
  T* q_s = carve<T>(at, Bq * LD * sizeof(T));
  T* dy_s = carve<T>(at, Bq * LD * sizeof(T));
  A* p_s = carve<A>(at, Bk * LP * sizeof(A));
  A* ds_s = carve<A>(at, Bk * LP * sizeof(A));
  A* lse_s = carve<A>(at, Bq * sizeof(A));
  A* delta_s = carve<A>(at, Bq * sizeof(A));

  const int tid = int(threadIdx.x), ty = tid / TX, tx = tid % TX;
  const BlockTile bt = block_tile(g, Bk, false);  // the first key tiles first: causal, every query sees them
  const int64_t b = bt.b, h = bt.h, j0 = bt.tile * Bk, ld = 3 * g.C(), r0 = j0 + ty * RM;
  load_rows<T, Bk, kD, LD>(k_s, qkv + g.qkv_at(b, j0, h, 1), ld, g.T - j0, g.D, tid, NT);
  load_rows<T, Bk, kD, LD>(v_s, qkv + g.qkv_at(b, j0, h, 2), ld, g.T - j0, g.D, tid, NT);

  const A scale = A(g.scale);
  A dk[RM][DN] = {}, dv[RM][DN] = {};
  for (int64_t i0 = g.queries_begin(j0) / Bq * Bq; i0 < g.T; i0 += Bq) {
    __syncthreads();  // the previous step's q, dy, p and ds are read
    load_rows<T, Bq, kD, LD>(q_s, qkv + g.qkv_at(b, i0, h, 0), ld, g.T - i0, g.D, tid, NT);
    load_rows<T, Bq, kD, LD>(dy_s, dy + g.y_at(b, i0, h), g.C(), g.T - i0, g.D, tid, NT);
    for (int e = tid; e < Bq; e += NT) {
      const bool in = i0 + e < g.T;
      lse_s[e] = in ? lse[g.lse_at(b, h, i0 + e)] : A(0);
      delta_s[e] = in ? delta[g.lse_at(b, h, i0 + e)] : A(0);
    }
    __syncthreads();
    A s[RM][CN] = {}, dp[RM][CN] = {};
    product_nt<RM, CN, TX, kD>(s, k_s + ty * RM * LD, LD, q_s + tx * LD, LD);
    product_nt<RM, CN, TX, kD>(dp, v_s + ty * RM * LD, LD, dy_s + tx * LD, LD);
#pragma unroll
    for (int a = 0; a < RM; ++a)
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        const int q = tx + c * TX;
        const A p = attn::probability(g, i0 + q, r0 + a, scale * s[a][c], lse_s[q]);
        p_s[(ty * RM + a) * LP + q] = p;
        ds_s[(ty * RM + a) * LP + q] = attn::score_grad(p, dp[a][c], delta_s[q]);
      }
    __syncthreads();
    product_nn<RM, DN, TX, Bq>(dv, p_s + ty * RM * LP, LP, dy_s + tx, LD);
    product_nn<RM, DN, TX, Bq>(dk, ds_s + ty * RM * LP, LP, q_s + tx, LD);
  }
  store_rows<RM, DN, TX>(g, dqkv, 1, b, h, r0, tx, dk, scale);
  store_rows<RM, DN, TX>(g, dqkv, 2, b, h, r0, tx, dv, A(1));
}

// dq: block = (b, h, tile of Bq query rows), Bk keys a step (query rows x key columns).
template <typename T, typename A, int kD, int Bq, int Bk>
__global__ void flash_backward_q_kernel(Geometry g, const T* dy, const T* qkv, const A* lse, const A* delta, T* dqkv) {
  constexpr int TY = threads_along(Bq), TX = threads_along(Bk), NT = TY * TX;
  constexpr int RM = Bq / TY, CN = Bk / TX, DN = kD / TX, LD = row_stride<T>(kD), LP = Bk + 1;
  constexpr size_t kBytes = shared_bytes<T, A>(Kernel::Query, kD, Bq, Bk);
  static_assert(Bq > 0 && kBytes <= kSharedBudget && kD % TX == 0, "flash dq: tiles do not fit");
  __shared__ __align__(16) unsigned char smem[kBytes];
  unsigned char* at = smem;
  T* q_s = carve<T>(at, Bq * LD * sizeof(T));
  T* dy_s = carve<T>(at, Bq * LD * sizeof(T));
  T* k_s = carve<T>(at, Bk * LD * sizeof(T));
  T* v_s = carve<T>(at, Bk * LD * sizeof(T));
  A* ds_s = carve<A>(at, Bq * LP * sizeof(A));

  const int tid = int(threadIdx.x), ty = tid / TX, tx = tid % TX;
  const BlockTile bt = block_tile(g, Bq, true);
  const int64_t b = bt.b, h = bt.h, i0 = bt.tile * Bq, ld = 3 * g.C(), r0 = i0 + ty * RM;
  load_rows<T, Bq, kD, LD>(q_s, qkv + g.qkv_at(b, i0, h, 0), ld, g.T - i0, g.D, tid, NT);
  load_rows<T, Bq, kD, LD>(dy_s, dy + g.y_at(b, i0, h), g.C(), g.T - i0, g.D, tid, NT);
  A row_lse[RM], row_delta[RM];
  load_row_stats(g, b, h, r0, lse, delta, row_lse, row_delta);

  const A scale = A(g.scale);
  A dq[RM][DN] = {};
  const int64_t keys = g.tile_keys_end(i0, Bq);
  for (int64_t j0 = 0; j0 < keys; j0 += Bk) {
    __syncthreads();  // the previous step's k and ds are read
    load_rows<T, Bk, kD, LD>(k_s, qkv + g.qkv_at(b, j0, h, 1), ld, g.T - j0, g.D, tid, NT);
    load_rows<T, Bk, kD, LD>(v_s, qkv + g.qkv_at(b, j0, h, 2), ld, g.T - j0, g.D, tid, NT);
    __syncthreads();
    A s[RM][CN] = {}, dp[RM][CN] = {};
    product_nt<RM, CN, TX, kD>(s, q_s + ty * RM * LD, LD, k_s + tx * LD, LD);
    product_nt<RM, CN, TX, kD>(dp, dy_s + ty * RM * LD, LD, v_s + tx * LD, LD);
#pragma unroll
    for (int a = 0; a < RM; ++a)
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        const int k = tx + c * TX;
        const A p = attn::probability(g, r0 + a, j0 + k, scale * s[a][c], row_lse[a]);
        ds_s[(ty * RM + a) * LP + k] = attn::score_grad(p, dp[a][c], row_delta[a]);
      }
    __syncthreads();
    product_nn<RM, DN, TX, Bk>(dq, ds_s + ty * RM * LP, LP, k_s + tx, LD);
  }
  store_rows<RM, DN, TX>(g, dqkv, 0, b, h, r0, tx, dq, scale);
}

// ---- launchers ----
template <typename T, int kD> void forward(const Geometry& g, const void* qkv, void* y, void* lse) {
  using A = acc_t<T>;
  constexpr TileDims t = pick_tile<T, A, kD, Kernel::Forward>();
  launch_kernel(flash_forward_kernel<T, A, kD, t.rows, t.cols>, blocks_of(g, t.rows),
                threads_along(t.rows) * threads_along(t.cols), g, static_cast<const T*>(qkv), static_cast<T*>(y),
                static_cast<A*>(lse));
  TR_CUDA_CHECK_LAUNCH("flash_forward_kernel");
}

template <typename T, int kD>
void backward(const Geometry& g, const void* dy, const void* qkv, const void* lse, const void* delta, void* dqkv) {
  using A = acc_t<T>;
  const T *dyp = static_cast<const T*>(dy), *qkvp = static_cast<const T*>(qkv);
  const A *lsep = static_cast<const A*>(lse), *deltap = static_cast<const A*>(delta);
  constexpr TileDims kv = pick_tile<T, A, kD, Kernel::KeyValue>();
  launch_kernel(flash_backward_kv_kernel<T, A, kD, kv.rows, kv.cols>, blocks_of(g, kv.rows),
                threads_along(kv.rows) * threads_along(kv.cols), g, dyp, qkvp, lsep, deltap, static_cast<T*>(dqkv));
  TR_CUDA_CHECK_LAUNCH("flash_backward_kv_kernel");
  constexpr TileDims q = pick_tile<T, A, kD, Kernel::Query>();
  launch_kernel(flash_backward_q_kernel<T, A, kD, q.rows, q.cols>, blocks_of(g, q.rows),
                threads_along(q.rows) * threads_along(q.cols), g, dyp, qkvp, lsep, deltap, static_cast<T*>(dqkv));
  TR_CUDA_CHECK_LAUNCH("flash_backward_q_kernel");
}

}  // namespace

void launch_attention(DType t, const attn::Geometry& g, const void* qkv, void* y, void* lse) {
  if (g.B * g.H * g.T == 0) return;
  if (is_16bit(t)) return launch_attention_mma(t, g, qkv, y, lse);
  TR_DISPATCH_FLOAT(t, "attention_qkvpacked", [&] {
    using T = scalar_t;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      with_head_bucket(g, "attention_qkvpacked", [&](auto kD) { forward<T, decltype(kD)::value>(g, qkv, y, lse); });
  });
}

void launch_attention_backward(DType t, const attn::Geometry& g, const void* dy, const void* qkv, const void* y,
                               const void* lse, void* delta, void* dqkv) {
  if (g.B * g.H * g.T == 0) return;
  TR_DISPATCH_FLOAT(t, "attention_qkvpacked_backward", [&] {
    using T = scalar_t;
    using A = acc_t<T>;
    launch_kernel(flash_delta_kernel<T, A>, grid_for(g.B * g.H * g.T * 32), kThreads, g, static_cast<const T*>(dy),
                  static_cast<const T*>(y), static_cast<A*>(delta));
    TR_CUDA_CHECK_LAUNCH("flash_delta_kernel");
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      with_head_bucket(g, "attention_qkvpacked_backward",
                       [&](auto kD) { backward<T, decltype(kD)::value>(g, dy, qkv, lse, delta, dqkv); });
    else
      launch_attention_mma_backward(t, g, dy, qkv, lse, delta, dqkv);
  });
}

}  // namespace tr::cuda
