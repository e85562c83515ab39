// CUDA kernels of cross_entropy_rows and its backward over contiguous rows [N, V]
// (ops/cross_entropy_math.h): a warp per row for rows up to 1024 logits, else a block of 256. In the
// forward each thread keeps the online state (max, sum of exponentials, sum, argmax) of its strided
// share of the row, one read of each logit, and the states merge across the warp with shuffles and
// across warps through shared memory (ce::merge: the result does not depend on which lane merges
// first). The backward is elementwise given the row's lse.
#include "ops/cross_entropy_math.h"
#include "ops/cuda/loops.cuh"

namespace tr::cuda {

namespace {

constexpr int kWarpRowMax = 1024;

template <typename A> __device__ __forceinline__ ce::Stats<A> shfl_xor(const ce::Stats<A>& v, int o) {
  const unsigned all = 0xffffffffu;
  return {__shfl_xor_sync(all, v.m, o), __shfl_xor_sync(all, v.s, o), __shfl_xor_sync(all, v.sum_x, o),
          int64_t(__shfl_xor_sync(all, (long long)v.arg, o))};
}

// The row's state in every thread of its group: the warp (blockDim.x == 32) or the block
// (blockDim.x == 256, blockDim.y == 1).
template <typename A> __device__ __forceinline__ ce::Stats<A> group_merge(ce::Stats<A> v, ce::Stats<A>* smem) {
  for (int o = 16; o > 0; o >>= 1) v = ce::merge(v, shfl_xor(v, o));
  if (blockDim.x == 32) return v;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
  __syncthreads();  // smem may still be read for the previous row
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = smem[0];
  for (int w = 1; w < nw; ++w) v = ce::merge(v, smem[w]);
  return v;
}

template <typename T>
__global__ void cross_entropy_kernel(CrossEntropyArgs a, acc_t<T>* loss, acc_t<T>* lse, bool* correct) {
  using A = acc_t<T>;
  __shared__ ce::Stats<A> smem[kThreads / 32];
  const T* x = static_cast<const T*>(a.x);
  const int64_t V = a.V;
  for (int64_t row = int64_t(blockIdx.x) * blockDim.y + threadIdx.y; row < a.N;
       row += int64_t(gridDim.x) * blockDim.y) {
    const T* xr = x + row * V;
    ce::Stats<A> st = ce::empty_stats<A>();
    for (int64_t k = threadIdx.x; k < V; k += blockDim.x) ce::push(st, A(xr[k]), k);
    st = group_merge(st, smem);
    if (threadIdx.x != 0) continue;
    const int64_t t = a.t[row];
    const A l = ce::lse_of(st);
    const A xt = t >= 0 && t < V ? A(xr[t]) : A(NAN);  // out of range: raised by the caller's check
    lse[row] = l;
    loss[row] = t == a.ignore_index ? A(0) : ce::row_loss(l, xt, st.sum_x, A(a.label_smoothing), V);
    correct[row] = st.arg == t;
  }
}

template <typename T> __global__ void cross_entropy_backward_kernel(CrossEntropyArgs a, const acc_t<T>* gl,
                                                                    const acc_t<T>* gz, const acc_t<T>* lse, T* dx) {
  using A = acc_t<T>;
  const T* x = static_cast<const T*>(a.x);
  const int64_t V = a.V;
  const A ls = A(a.label_smoothing);
  for (int64_t row = int64_t(blockIdx.x) * blockDim.y + threadIdx.y; row < a.N;
       row += int64_t(gridDim.x) * blockDim.y) {
    const int64_t t = a.t[row];
    const A b = t == a.ignore_index ? A(0) : gl[row], g = b + gz[row], L = lse[row];
    const T* xr = x + row * V;
    T* o = dx + row * V;
    for (int64_t k = threadIdx.x; k < V; k += blockDim.x) o[k] = T(ce::grad(A(xr[k]), L, g, b, ls, V, k == t));
  }
}

dim3 row_block(int64_t V) { return V <= kWarpRowMax ? dim3(32, kThreads / 32) : dim3(kThreads, 1); }
dim3 row_grid(int64_t N, const dim3& block) {
  return dim3(unsigned(std::min<int64_t>((N + block.y - 1) / block.y, int64_t(1) << 20)));
}

}  // namespace

void launch_cross_entropy(DType t, const CrossEntropyArgs& a, void* loss, void* lse, bool* correct) {
  if (a.N == 0) return;
  const dim3 block = row_block(a.V), grid = row_grid(a.N, block);
  TR_DISPATCH_FLOAT(t, "cross_entropy_rows", [&] {
    using A = acc_t<scalar_t>;
    launch_kernel(cross_entropy_kernel<scalar_t>, grid, block, a, static_cast<A*>(loss), static_cast<A*>(lse), correct);
    TR_CUDA_CHECK_LAUNCH("cross_entropy_kernel");
  });
}

void launch_cross_entropy_backward(DType t, const CrossEntropyArgs& a, const void* g_loss, const void* g_lse,
                                   const void* lse, void* dx) {
  if (a.N == 0 || a.V == 0) return;
  const dim3 block = row_block(a.V), grid = row_grid(a.N, block);
  TR_DISPATCH_FLOAT(t, "cross_entropy_rows_backward", [&] {
    using A = acc_t<scalar_t>;
    launch_kernel(cross_entropy_backward_kernel<scalar_t>, grid, block, a, static_cast<const A*>(g_loss),
                  static_cast<const A*>(g_lse), static_cast<const A*>(lse), static_cast<scalar_t*>(dx));
    TR_CUDA_CHECK_LAUNCH("cross_entropy_backward_kernel");
  });
}

}  // namespace tr::cuda
