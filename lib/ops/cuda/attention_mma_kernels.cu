// Tensor-core FlashAttention-2 kernels of attention_qkvpacked for f16 and bf16: the tiles and steps
// of attention_kernels.cu (which has the overview), with every product of a tile (q k^T and p v;
// k q^T, v dy^T, p^T dy and ds^T q; q k^T, dy v^T and ds k) in nvcuda::wmma 16 x 16 x 16 fragments
// of the 16-bit inputs with f32 accumulators, a warp per output fragment. The masking, the online
// softmax and ds are f32 SIMT work on the scores the fragments leave in shared memory (16 x 16
// threads, thread (ty, tx) owning rows ty RM + a and columns tx + 16 c, as in the SIMT kernels).
// As in FlashAttention-2, p and ds are rounded to the input dtype for their products while the row
// sums l add the f32 p, so that lse is the f32 log-sum-exp of the scores (the backward's p =
// exp(s - lse) sum to 1 in f32) and y is off by at most p's rounding. The forward rescales its
// output in registers (each step's p v comes back through shared memory); the backward's dk, dv
// and dq need no rescaling and stay in fragments until the end.
#include <mma.h>
#include "ops/cuda/attention_mma.h"
#include "ops/cuda/attention_tiles.cuh"

namespace tr::cuda {

namespace {

using namespace flash;
namespace wmma = nvcuda::wmma;

// The 16-bit storage types as wmma's element types (the same bits).
template <typename T> struct WmmaType;
template <> struct WmmaType<Half> { using type = __half; };
template <> struct WmmaType<BFloat16> { using type = __nv_bfloat16; };

constexpr int kF = 16;                       // m16n16k16 fragments
constexpr int kWarps = 8;                    // warps of a block
constexpr int kBlock = 32 * kWarps;          // threads of a block
constexpr int kTX = 16, kTY = kBlock / kTX;  // the SIMT layout

// Shared row strides in elements: 16-bit rows padded by 8 (wmma's ldm is a multiple of 8 16-bit
// elements; 16 bytes more a row start rows 4 banks apart), f32 rows by 4 (a multiple of 4).
constexpr int half_stride(int n) { return n + 8; }
constexpr int float_stride(int n) { return n + 4; }

// Shared memory of each kernel for a tile of `rows` x `cols` scores (forward and dq: query rows x
// key columns; dk/dv: key rows x query columns), and the [rows][kD] f32 staging of the backward's
// outputs, which reuses the whole of it at the end.
enum class Kernel { Forward, KeyValue, Query };
constexpr size_t shared_bytes(Kernel k, int kD, int rows, int cols) {
  const size_t head = size_t(half_stride(kD)) * 2, heads_rows = align32(rows * head), heads_cols = align32(cols * head);
  const size_t scores = align32(size_t(rows) * float_stride(cols) * 4);
  const size_t staging = size_t(rows) * float_stride(kD) * 4;
  size_t n = 0;
  switch (k) {
    case Kernel::Forward:  // q; k, v; p (16-bit); s, then p v (f32)
      n = heads_rows + 2 * heads_cols + align32(size_t(rows) * half_stride(cols) * 2) +
          align32(size_t(rows) * float_stride(cols > kD ? cols : kD) * 4);
      break;
    case Kernel::KeyValue:  // k, v; q, dy; s^T, then p^T; dp^T, then ds^T; lse, D
      n = 2 * heads_rows + 2 * heads_cols + 2 * scores + 2 * align32(cols * 4);
      break;
    case Kernel::Query:  // q, dy; k, v; s, then ds; dp
      n = 2 * heads_rows + 2 * heads_cols + 2 * scores;
      break;
  }
  return n > staging || k == Kernel::Forward ? n : staging;
}

// The tile of a kernel: the largest of these whose shared memory fits the budget.
constexpr TileDims kTileChoices[] = {{64, 64}, {64, 32}, {32, 32}, {32, 16}, {16, 16}};
template <int kD, Kernel K> constexpr TileDims pick_tile() {
  for (TileDims t : kTileChoices)
    if (shared_bytes(K, kD, t.rows, t.cols) <= kSharedBudget) return t;
  return {0, 0};  // rejected by the kernel's static_assert
}

// Offset of element (r, c) of a tile with leading dimension ld: row-major r ld + c, column-major
// r + c ld (the transpose of a row-major tile).
template <typename L> __device__ __forceinline__ int offset(int r, int c, int ld) {
  return std::is_same_v<L, wmma::row_major> ? r * ld + c : r + c * ld;
}

using Accumulator = wmma::fragment<wmma::accumulator, kF, kF, kF, float>;

// acc += A[m, m + 16) x [0, K) B[0, K) x [n, n + 16), A (layout LA, ld lda) and B (LB, ldb) 16-bit.
template <int K, typename LA, typename LB, typename E>
__device__ __forceinline__ void mma_rows(Accumulator& acc, const E* a, int lda, int m, const E* b, int ldb, int n) {
#pragma unroll
  for (int k = 0; k < K; k += kF) {
    wmma::fragment<wmma::matrix_a, kF, kF, kF, E, LA> fa;
    wmma::fragment<wmma::matrix_b, kF, kF, kF, E, LB> fb;
    wmma::load_matrix_sync(fa, a + offset<LA>(m, k, lda), lda);
    wmma::load_matrix_sync(fb, b + offset<LB>(k, n, ldb), ldb);
    wmma::mma_sync(acc, fa, fb, acc);
  }
}

// C = A B into f32 shared c (row-major, ldc): A is M x K, B is K x N; warp w computes the output
// fragments w, w + kWarps, ... of the (M / 16) x (N / 16) grid.
template <int M, int N, int K, typename LA, typename LB, typename E>
__device__ __forceinline__ void product_to_shared(float* c, int ldc, const E* a, int lda, const E* b, int ldb) {
  const int warp = int(threadIdx.x) / 32;
  for (int f = warp; f < (M / kF) * (N / kF); f += kWarps) {
    const int m = f / (N / kF) * kF, n = f % (N / kF) * kF;
    Accumulator acc;
    wmma::fill_fragment(acc, 0.0f);
    mma_rows<K, LA, LB>(acc, a, lda, m, b, ldb, n);
    wmma::store_matrix_sync(c + m * ldc + n, acc, ldc, wmma::mem_row_major);
  }
}

// An M x N f32 result held in fragments across steps: this warp's share of the grid.
template <int M, int N> struct Fragments {
  static constexpr int kCount = (M / kF) * (N / kF), kPerWarp = (kCount + kWarps - 1) / kWarps;
  Accumulator f[kPerWarp];
  __device__ __forceinline__ Fragments() {
#pragma unroll
    for (int i = 0; i < kPerWarp; ++i) wmma::fill_fragment(f[i], 0.0f);
  }
  // this warp's i-th fragment (its top-left row and column), or false
  __device__ __forceinline__ bool at(int i, int& m, int& n) const {
    const int k = int(threadIdx.x) / 32 + kWarps * i;
    m = k / (N / kF) * kF;
    n = k % (N / kF) * kF;
    return k < kCount;
  }
  // += A B, A M x K and B K x N
  template <int K, typename LA, typename LB, typename E>
  __device__ __forceinline__ void add_product(const E* a, int lda, const E* b, int ldb) {
#pragma unroll
    for (int i = 0; i < kPerWarp; ++i) {
      int m, n;
      if (at(i, m, n)) mma_rows<K, LA, LB>(f[i], a, lda, m, b, ldb, n);
    }
  }
  __device__ __forceinline__ void store(float* c, int ldc) const {
#pragma unroll
    for (int i = 0; i < kPerWarp; ++i) {
      int m, n;
      if (at(i, m, n)) wmma::store_matrix_sync(c + m * ldc + n, f[i], ldc, wmma::mem_row_major);
    }
  }
};

// Rows r0 + r (r < R) of a staged [R][ldc] f32 tile times `scale` into `part` of dqkv, for rows < T
// and columns < D.
template <int R, int kD, typename T> __device__ __forceinline__ void store_staged(const Geometry& g, const float* c,
                                                                                  int ldc, T* dqkv, int part, int64_t b,
                                                                                  int64_t h, int64_t r0, float scale) {
  for (int e = int(threadIdx.x); e < R * kD; e += kBlock) {
    const int r = e / kD, d = e % kD;
    if (r0 + r < g.T && d < g.D) dqkv[g.qkv_at(b, r0 + r, h, part) + d] = T(c[r * ldc + d] * scale);
  }
}

// ---- forward: block = (b, h, tile of Br query rows), Bc keys a step ----
template <typename T, int kD, int Br, int Bc>
__global__ void flash_forward_mma_kernel(Geometry g, const T* qkv, T* y, float* lse) {
  using E = typename WmmaType<T>::type;
  constexpr int RM = Br / kTY, CN = Bc / kTX, DN = kD / kTX;
  constexpr int LH = half_stride(kD), LP = half_stride(Bc), LF = float_stride(Bc > kD ? Bc : kD);
  constexpr size_t kBytes = shared_bytes(Kernel::Forward, kD, Br, Bc);
  static_assert(Br > 0 && kBytes <= kSharedBudget && RM >= 1 && CN >= 1, "flash forward (mma): tiles do not fit");
  __shared__ __align__(32) unsigned char smem[kBytes];
  unsigned char* at = smem;
  T* q_s = carve<T>(at, Br * LH * sizeof(T));
  T* k_s = carve<T>(at, Bc * LH * sizeof(T));
  T* v_s = carve<T>(at, Bc * LH * sizeof(T));
  T* p_s = carve<T>(at, Br * LP * sizeof(T));
  float* f_s = carve<float>(at, Br * LF * sizeof(float));  // s, then p v
  const E *qe = reinterpret_cast<const E*>(q_s), *ke = reinterpret_cast<const E*>(k_s),
          *ve = reinterpret_cast<const E*>(v_s), *pe = reinterpret_cast<const E*>(p_s);

  const int tid = int(threadIdx.x), ty = tid / kTX, tx = tid % kTX;
  const BlockTile bt = block_tile(g, Br, true);
  const int64_t b = bt.b, h = bt.h, i0 = bt.tile * Br, ld = 3 * g.C(), r0 = i0 + ty * RM;
  load_rows<T, Br, kD, LH>(q_s, qkv + g.qkv_at(b, i0, h, 0), ld, g.T - i0, g.D, tid, kBlock);

  const float scale = float(g.scale);
  float o[RM][DN] = {}, alpha[RM];
  attn::OnlineSoftmax<float> row[RM];
  const int64_t keys = g.tile_keys_end(i0, Br);
  for (int64_t j0 = 0; j0 < keys; j0 += Bc) {
    __syncthreads();  // the previous step's k, v and p v are read
    load_rows<T, Bc, kD, LH>(k_s, qkv + g.qkv_at(b, j0, h, 1), ld, g.T - j0, g.D, tid, kBlock);
    load_rows<T, Bc, kD, LH>(v_s, qkv + g.qkv_at(b, j0, h, 2), ld, g.T - j0, g.D, tid, kBlock);
    __syncthreads();
    product_to_shared<Br, Bc, kD, wmma::row_major, wmma::col_major>(f_s, LF, qe, LH, ke, LH);  // q k^T
    __syncthreads();
#pragma unroll
    for (int a = 0; a < RM; ++a) {
      const int r = ty * RM + a;
      float s[CN], mt = -INFINITY;
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        s[c] = g.visible(i0 + r, j0 + tx + c * kTX) ? scale * f_s[r * LF + tx + c * kTX] : -INFINITY;
        mt = s[c] > mt ? s[c] : mt;
      }
      alpha[a] = row[a].enter(lanes_max<kTX>(mt));
      float sum = 0.0f;
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        const float p = row[a].p(s[c]);
        p_s[r * LP + tx + c * kTX] = T(p);
        sum += p;
      }
      row[a].add(lanes_sum<kTX>(sum));
    }
    __syncthreads();
    product_to_shared<Br, kD, Bc, wmma::row_major, wmma::row_major>(f_s, LF, pe, LP, ve, LH);  // p v
    __syncthreads();
#pragma unroll
    for (int a = 0; a < RM; ++a)
#pragma unroll
      for (int c = 0; c < DN; ++c) o[a][c] = o[a][c] * alpha[a] + f_s[(ty * RM + a) * LF + tx + c * kTX];
  }
#pragma unroll
  for (int a = 0; a < RM; ++a) {
    if (r0 + a >= g.T) continue;
    const float inv = 1.0f / row[a].l;
#pragma unroll
    for (int c = 0; c < DN; ++c) o[a][c] *= inv;
    if (tx == 0) lse[g.lse_at(b, h, r0 + a)] = row[a].lse();
  }
  store_rows<RM, DN, kTX>(g, y, -1, b, h, r0, tx, o, 1.0f);
}

// ---- dk and dv: block = (b, h, tile of Bk keys), Bq query rows a step (key rows x query columns) ----
template <typename T, int kD, int Bk, int Bq>
__global__ void flash_backward_kv_mma_kernel(Geometry g, const T* dy, const T* qkv, const float* lse,
                                             const float* delta, T* dqkv) {
  using E = typename WmmaType<T>::type;
  constexpr int RM = Bk / kTY, CN = Bq / kTX;
  constexpr int LH = half_stride(kD), LF = float_stride(Bq), LP = half_stride(Bq), LO = float_stride(kD);
  constexpr size_t kBytes = shared_bytes(Kernel::KeyValue, kD, Bk, Bq);
  static_assert(Bk > 0 && kBytes <= kSharedBudget && RM >= 1 && CN >= 1, "flash dk/dv (mma): tiles do not fit");
  __shared__ __align__(32) unsigned char smem[kBytes];
  unsigned char* at = smem;
  T* k_s = carve<T>(at, Bk * LH * sizeof(T));
  T* v_s = carve<T>(at, Bk * LH * sizeof(T));
  T* q_s = carve<T>(at, Bq * LH * sizeof(T));
  T* dy_s = carve<T>(at, Bq * LH * sizeof(T));
  float* s_s = carve<float>(at, Bk * LF * sizeof(float));   // s^T, then p^T (16-bit, row stride LP)
  float* dp_s = carve<float>(at, Bk * LF * sizeof(float));  // dp^T, then ds^T (16-bit)
  float* lse_s = carve<float>(at, Bq * sizeof(float));
  float* delta_s = carve<float>(at, Bq * sizeof(float));
  T* p_h = reinterpret_cast<T*>(s_s);
  T* ds_h = reinterpret_cast<T*>(dp_s);
  const E *ke = reinterpret_cast<const E*>(k_s), *ve = reinterpret_cast<const E*>(v_s),
          *qe = reinterpret_cast<const E*>(q_s), *dye = reinterpret_cast<const E*>(dy_s),
          *pe = reinterpret_cast<const E*>(p_h), *dse = reinterpret_cast<const E*>(ds_h);

  const int tid = int(threadIdx.x), ty = tid / kTX, tx = tid % kTX;
  const BlockTile bt = block_tile(g, Bk, false);  // the first key tiles first: causal, every query sees them
  const int64_t b = bt.b, h = bt.h, j0 = bt.tile * Bk, ld = 3 * g.C();
  load_rows<T, Bk, kD, LH>(k_s, qkv + g.qkv_at(b, j0, h, 1), ld, g.T - j0, g.D, tid, kBlock);
  load_rows<T, Bk, kD, LH>(v_s, qkv + g.qkv_at(b, j0, h, 2), ld, g.T - j0, g.D, tid, kBlock);

  const float scale = float(g.scale);
  Fragments<Bk, kD> dk, dv;
  for (int64_t i0 = g.queries_begin(j0) / Bq * Bq; i0 < g.T; i0 += Bq) {
    __syncthreads();  // the previous step's q, dy, p^T and ds^T are read
    load_rows<T, Bq, kD, LH>(q_s, qkv + g.qkv_at(b, i0, h, 0), ld, g.T - i0, g.D, tid, kBlock);
    load_rows<T, Bq, kD, LH>(dy_s, dy + g.y_at(b, i0, h), g.C(), g.T - i0, g.D, tid, kBlock);
    for (int e = tid; e < Bq; e += kBlock) {
      const bool in = i0 + e < g.T;
      lse_s[e] = in ? lse[g.lse_at(b, h, i0 + e)] : 0.0f;
      delta_s[e] = in ? delta[g.lse_at(b, h, i0 + e)] : 0.0f;
    }
    __syncthreads();
    product_to_shared<Bk, Bq, kD, wmma::row_major, wmma::col_major>(s_s, LF, ke, LH, qe, LH);    // k q^T
    product_to_shared<Bk, Bq, kD, wmma::row_major, wmma::col_major>(dp_s, LF, ve, LH, dye, LH);  // v dy^T
    __syncthreads();
    float p[RM][CN], ds[RM][CN];
#pragma unroll
    for (int a = 0; a < RM; ++a)
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        const int r = ty * RM + a, q = tx + c * kTX;
        p[a][c] = attn::probability(g, i0 + q, j0 + r, scale * s_s[r * LF + q], lse_s[q]);
        ds[a][c] = attn::score_grad(p[a][c], dp_s[r * LF + q], delta_s[q]);
      }
    __syncthreads();  // the f32 scores are read: their memory takes the 16-bit p^T and ds^T
#pragma unroll
    for (int a = 0; a < RM; ++a)
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        const int r = ty * RM + a, q = tx + c * kTX;
        p_h[r * LP + q] = T(p[a][c]);
        ds_h[r * LP + q] = T(ds[a][c]);
      }
    __syncthreads();
    dv.template add_product<Bq, wmma::row_major, wmma::row_major>(pe, LP, dye, LH);  // p^T dy
    dk.template add_product<Bq, wmma::row_major, wmma::row_major>(dse, LP, qe, LH);  // ds^T q
  }
  // the tiles are free: stage each result in f32 there and write it out
  float* o_s = reinterpret_cast<float*>(smem);
  __syncthreads();
  dv.store(o_s, LO);
  __syncthreads();
  store_staged<Bk, kD>(g, o_s, LO, dqkv, 2, b, h, j0, 1.0f);
  __syncthreads();
  dk.store(o_s, LO);
  __syncthreads();
  store_staged<Bk, kD>(g, o_s, LO, dqkv, 1, b, h, j0, scale);
}

// ---- dq: block = (b, h, tile of Bq query rows), Bk keys a step (query rows x key columns) ----
template <typename T, int kD, int Bq, int Bk>
__global__ void flash_backward_q_mma_kernel(Geometry g, const T* dy, const T* qkv, const float* lse, const float* delta,
                                            T* dqkv) {
  using E = typename WmmaType<T>::type;
  constexpr int RM = Bq / kTY, CN = Bk / kTX;
  constexpr int LH = half_stride(kD), LF = float_stride(Bk), LP = half_stride(Bk), LO = float_stride(kD);
  constexpr size_t kBytes = shared_bytes(Kernel::Query, kD, Bq, Bk);
  static_assert(Bq > 0 && kBytes <= kSharedBudget && RM >= 1 && CN >= 1, "flash dq (mma): tiles do not fit");
  __shared__ __align__(32) unsigned char smem[kBytes];
  unsigned char* at = smem;
  T* q_s = carve<T>(at, Bq * LH * sizeof(T));
  T* dy_s = carve<T>(at, Bq * LH * sizeof(T));
  T* k_s = carve<T>(at, Bk * LH * sizeof(T));
  T* v_s = carve<T>(at, Bk * LH * sizeof(T));
  float* s_s = carve<float>(at, Bq * LF * sizeof(float));  // s, then ds (16-bit, row stride LP)
  float* dp_s = carve<float>(at, Bq * LF * sizeof(float));
  T* ds_h = reinterpret_cast<T*>(s_s);
  const E *qe = reinterpret_cast<const E*>(q_s), *dye = reinterpret_cast<const E*>(dy_s),
          *ke = reinterpret_cast<const E*>(k_s), *ve = reinterpret_cast<const E*>(v_s),
          *dse = reinterpret_cast<const E*>(ds_h);

  const int tid = int(threadIdx.x), ty = tid / kTX, tx = tid % kTX;
  const BlockTile bt = block_tile(g, Bq, true);
  const int64_t b = bt.b, h = bt.h, i0 = bt.tile * Bq, ld = 3 * g.C(), r0 = i0 + ty * RM;
  load_rows<T, Bq, kD, LH>(q_s, qkv + g.qkv_at(b, i0, h, 0), ld, g.T - i0, g.D, tid, kBlock);
  load_rows<T, Bq, kD, LH>(dy_s, dy + g.y_at(b, i0, h), g.C(), g.T - i0, g.D, tid, kBlock);
  float row_lse[RM], row_delta[RM];
  load_row_stats(g, b, h, r0, lse, delta, row_lse, row_delta);

  const float scale = float(g.scale);
  Fragments<Bq, kD> dq;
  const int64_t keys = g.tile_keys_end(i0, Bq);
  for (int64_t j0 = 0; j0 < keys; j0 += Bk) {
    __syncthreads();  // the previous step's k and ds are read
    load_rows<T, Bk, kD, LH>(k_s, qkv + g.qkv_at(b, j0, h, 1), ld, g.T - j0, g.D, tid, kBlock);
    load_rows<T, Bk, kD, LH>(v_s, qkv + g.qkv_at(b, j0, h, 2), ld, g.T - j0, g.D, tid, kBlock);
    __syncthreads();
    product_to_shared<Bq, Bk, kD, wmma::row_major, wmma::col_major>(s_s, LF, qe, LH, ke, LH);    // q k^T
    product_to_shared<Bq, Bk, kD, wmma::row_major, wmma::col_major>(dp_s, LF, dye, LH, ve, LH);  // dy v^T
    __syncthreads();
    float ds[RM][CN];
#pragma unroll
    for (int a = 0; a < RM; ++a)
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        const int r = ty * RM + a, k = tx + c * kTX;
        const float p = attn::probability(g, r0 + a, j0 + k, scale * s_s[r * LF + k], row_lse[a]);
        ds[a][c] = attn::score_grad(p, dp_s[r * LF + k], row_delta[a]);
      }
    __syncthreads();  // the f32 scores are read: their memory takes the 16-bit ds
#pragma unroll
    for (int a = 0; a < RM; ++a)
#pragma unroll
      for (int c = 0; c < CN; ++c) ds_h[(ty * RM + a) * LP + tx + c * kTX] = T(ds[a][c]);
    __syncthreads();
    dq.template add_product<Bk, wmma::row_major, wmma::row_major>(dse, LP, ke, LH);  // ds k
  }
  float* o_s = reinterpret_cast<float*>(smem);
  __syncthreads();
  dq.store(o_s, LO);
  __syncthreads();
  store_staged<Bq, kD>(g, o_s, LO, dqkv, 0, b, h, i0, scale);
}

template <typename T, int kD> void forward(const Geometry& g, const void* qkv, void* y, void* lse) {
  constexpr TileDims t = pick_tile<kD, Kernel::Forward>();
  launch_kernel(flash_forward_mma_kernel<T, kD, t.rows, t.cols>, blocks_of(g, t.rows), kBlock, g,
                static_cast<const T*>(qkv), static_cast<T*>(y), static_cast<float*>(lse));
  TR_CUDA_CHECK_LAUNCH("flash_forward_mma_kernel");
}

template <typename T, int kD>
void backward(const Geometry& g, const void* dy, const void* qkv, const void* lse, const void* delta, void* dqkv) {
  const T *dyp = static_cast<const T*>(dy), *qkvp = static_cast<const T*>(qkv);
  const float *lsep = static_cast<const float*>(lse), *deltap = static_cast<const float*>(delta);
  constexpr TileDims kv = pick_tile<kD, Kernel::KeyValue>();
  launch_kernel(flash_backward_kv_mma_kernel<T, kD, kv.rows, kv.cols>, blocks_of(g, kv.rows), kBlock, g, dyp, qkvp,
                lsep, deltap, static_cast<T*>(dqkv));
  TR_CUDA_CHECK_LAUNCH("flash_backward_kv_mma_kernel");
  constexpr TileDims q = pick_tile<kD, Kernel::Query>();
  launch_kernel(flash_backward_q_mma_kernel<T, kD, q.rows, q.cols>, blocks_of(g, q.rows), kBlock, g, dyp, qkvp, lsep,
                deltap, static_cast<T*>(dqkv));
  TR_CUDA_CHECK_LAUNCH("flash_backward_q_mma_kernel");
}

// f<T>() for the 16-bit dtype t.
template <typename F> void with_16bit(DType t, const char* op, F&& f) {
  if (t == DType::BF16)
    f(BFloat16{});
  else if (t == DType::F16)
    f(Half{});
  else
    throw_dtype_unsupported(op, t);
}

}  // namespace

void launch_attention_mma(DType t, const attn::Geometry& g, const void* qkv, void* y, void* lse) {
  with_16bit(t, "attention_qkvpacked", [&](auto tag) {
    using T = decltype(tag);
    with_head_bucket(g, "attention_qkvpacked", [&](auto kD) { forward<T, decltype(kD)::value>(g, qkv, y, lse); });
  });
}

void launch_attention_mma_backward(DType t, const attn::Geometry& g, const void* dy, const void* qkv, const void* lse,
                                   const void* delta, void* dqkv) {
  with_16bit(t, "attention_qkvpacked_backward", [&](auto tag) {
    using T = decltype(tag);
    with_head_bucket(g, "attention_qkvpacked_backward",
                     [&](auto kD) { backward<T, decltype(kD)::value>(g, dy, qkv, lse, delta, dqkv); });
  });
}

}  // namespace tr::cuda
