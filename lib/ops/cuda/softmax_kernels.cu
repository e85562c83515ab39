// CUDA softmax / log_softmax over rows of length len along one dim (any strides):
//   m = max_k x_k,  s = sum_k exp(x_k - m),  y_k = exp(x_k - m) / s  or  x_k - m - log s,
// computed in acc_t<T> as the CPU kernel. A warp per row for rows up to 1024, else a block.
#include "ops/cuda/loops.cuh"
#include "ops/scalar_math.h"

namespace tr::cuda {

namespace {

constexpr int kWarpRowMax = 1024;

// Reduction over the threads of a row group: the warp (blockDim.x == 32) or the whole block
// (blockDim.x == 256, blockDim.y == 1). Every thread gets the result.
template <typename A, typename F> __device__ __forceinline__ A group_reduce(A v, const F& f, A* smem) {
  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (blockDim.x == 32) return v;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
  __syncthreads();  // smem may still be read from the previous reduction
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = smem[0];
  for (int w = 1; w < nw; ++w) v = f(v, smem[w]);
  return v;
}

template <typename A> struct MaxIgnoringNan {  // std::max(m, x) as the CPU loop uses it: a NaN x never replaces m
  __device__ A operator()(A a, A b) const { return (a < b) ? b : a; }
};
template <typename A> struct Plus {
  __device__ A operator()(A a, A b) const { return a + b; }
};

template <typename T> __global__ void softmax_kernel(SoftmaxArgs a, bool log) {
  using A = acc_t<T>;
  __shared__ A smem[kThreads / 32];
  const T* in = static_cast<const T*>(a.in);
  T* out = static_cast<T*>(a.out);
  const int lane = threadIdx.x, G = blockDim.x;
  const int64_t len = a.len;
  for (int64_t row = int64_t(blockIdx.x) * blockDim.y + threadIdx.y; row < a.rows;
       row += int64_t(gridDim.x) * blockDim.y) {
    const T* x = in + strided_offset<kMaxDims>(row, a.ndim, a.sizes, a.in_strides);
    T* y = out + strided_offset<kMaxDims>(row, a.ndim, a.sizes, a.out_strides);
    const int64_t sx = a.in_dim_stride, sy = a.out_dim_stride;
    A m = A(-INFINITY);
    for (int64_t k = lane; k < len; k += G) m = MaxIgnoringNan<A>{}(m, A(x[k * sx]));
    m = group_reduce(m, MaxIgnoringNan<A>{}, smem);
    A s = 0;
    for (int64_t k = lane; k < len; k += G) s += math::exp(A(x[k * sx]) - m);
    s = group_reduce(s, Plus<A>{}, smem);
    if (log) {
      const A ls = math::log(s);
      for (int64_t k = lane; k < len; k += G) y[k * sy] = T(A(x[k * sx]) - m - ls);
    } else {
      const A inv = A(1) / s;
      for (int64_t k = lane; k < len; k += G) y[k * sy] = T(math::exp(A(x[k * sx]) - m) * inv);
    }
  }
}

template <typename T> __global__ void softmax_backward_kernel(SoftmaxArgs a, const T* grad, bool log) {
  using A = acc_t<T>;
  __shared__ A smem[kThreads / 32];
  const T* in = static_cast<const T*>(a.in);
  T* out = static_cast<T*>(a.out);
  const int lane = threadIdx.x, G = blockDim.x;
  const int64_t len = a.len;
  for (int64_t row = int64_t(blockIdx.x) * blockDim.y + threadIdx.y; row < a.rows;
       row += int64_t(gridDim.x) * blockDim.y) {
    const int64_t off = strided_offset<kMaxDims>(row, a.ndim, a.sizes, a.in_strides);
    const T *y = in + off, *g = grad + off;
    T* o = out + strided_offset<kMaxDims>(row, a.ndim, a.sizes, a.out_strides);
    const int64_t sx = a.in_dim_stride, so = a.out_dim_stride;
    A s = 0;
    for (int64_t k = lane; k < len; k += G) s += log ? A(g[k * sx]) : A(g[k * sx]) * A(y[k * sx]);
    s = group_reduce(s, Plus<A>{}, smem);
    for (int64_t k = lane; k < len; k += G) {
      const A gk = A(g[k * sx]), yk = A(y[k * sx]);
      o[k * so] = T(log ? gk - math::exp(yk) * s : yk * (gk - s));
    }
  }
}

}  // namespace

void launch_softmax_backward(bool log, DType t, const SoftmaxArgs& a, const void* grad) {
  if (a.rows == 0 || a.len == 0) return;
  const bool warp_rows = a.len <= kWarpRowMax;
  dim3 block = warp_rows ? dim3(32, kThreads / 32) : dim3(kThreads, 1);
  const int64_t blocks = (a.rows + block.y - 1) / block.y;
  dim3 grid(unsigned(std::min<int64_t>(blocks, int64_t(1) << 20)));
  TR_DISPATCH_FLOAT(t, "softmax_backward", [&] {
    launch_kernel(softmax_backward_kernel<scalar_t>, grid, block, a, static_cast<const scalar_t*>(grad), log);
    TR_CUDA_CHECK_LAUNCH("softmax_backward_kernel");
  });
}

void launch_softmax(bool log, DType t, const SoftmaxArgs& a) {
  if (a.rows == 0 || a.len == 0) return;
  const bool warp_rows = a.len <= kWarpRowMax;
  dim3 block = warp_rows ? dim3(32, kThreads / 32) : dim3(kThreads, 1);
  const int64_t blocks = (a.rows + block.y - 1) / block.y;
  dim3 grid(unsigned(std::min<int64_t>(blocks, int64_t(1) << 20)));
  TR_DISPATCH_FLOAT(t, log ? "log_softmax" : "softmax", [&] {
    launch_kernel(softmax_kernel<scalar_t>, grid, block, a, log);
    TR_CUDA_CHECK_LAUNCH("softmax_kernel");
  });
}

}  // namespace tr::cuda
