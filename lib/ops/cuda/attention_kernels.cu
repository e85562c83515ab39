// CUDA kernels of attention_qkvpacked and its backward: one thread per row, each running the row
// formulas of ops/attention_math.h (the CPU tests check the blocked CPU kernel against the same
// functions). A plain first kernel: each row re-reads the keys it sees; no shared-memory tiling.
#include "ops/attention_math.h"
#include "ops/cuda/loops.cuh"

namespace tr::cuda {

namespace {

template <typename T>
__global__ void attention_forward_kernel(attn::Geometry g, const T* qkv, T* y, T* lse) {
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < g.B * g.H * g.T;
       r += int64_t(blockDim.x) * gridDim.x) {
    const int64_t i = r % g.T, bh = r / g.T;
    attn::forward_row<T, T>(g, qkv, y, lse, bh / g.H, bh % g.H, i);
  }
}

template <typename T>
__global__ void attention_backward_kernel(attn::Geometry g, const T* dy, const T* qkv, const T* y, const T* lse,
                                          T* dqkv) {
  // rows [0, n): dq of query row r; rows [n, 2 n): dk and dv of key row r - n
  const int64_t n = g.B * g.H * g.T;
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < 2 * n; r += int64_t(blockDim.x) * gridDim.x) {
    const int64_t rr = r < n ? r : r - n, i = rr % g.T, bh = rr / g.T;
    if (r < n) attn::backward_q_row<T, T>(g, dy, qkv, y, lse, dqkv, bh / g.H, bh % g.H, i);
    else attn::backward_kv_row<T, T>(g, dy, qkv, y, lse, dqkv, bh / g.H, bh % g.H, i);
  }
}

}  // namespace

void launch_attention(DType t, const attn::Geometry& g, const void* qkv, void* y, void* lse) {
  const int64_t rows = g.B * g.H * g.T;
  if (rows == 0) return;
  TR_DISPATCH_FLOAT(t, "attention_qkvpacked", [&] {
    using T = scalar_t;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      launch_kernel(attention_forward_kernel<T>, grid_for(rows), kThreads, g, static_cast<const T*>(qkv),
                    static_cast<T*>(y), static_cast<T*>(lse));
      TR_CUDA_CHECK_LAUNCH("attention_forward_kernel");
    }
  });
}

void launch_attention_backward(DType t, const attn::Geometry& g, const void* dy, const void* qkv, const void* y,
                               const void* lse, void* dqkv) {
  const int64_t rows = g.B * g.H * g.T;
  if (rows == 0) return;
  TR_DISPATCH_FLOAT(t, "attention_qkvpacked_backward", [&] {
    using T = scalar_t;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      launch_kernel(attention_backward_kernel<T>, grid_for(2 * rows), kThreads, g, static_cast<const T*>(dy),
                    static_cast<const T*>(qkv), static_cast<const T*>(y), static_cast<const T*>(lse),
                    static_cast<T*>(dqkv));
      TR_CUDA_CHECK_LAUNCH("attention_backward_kernel");
    }
  });
}

}  // namespace tr::cuda
