// CUDA kernels of native_layer_norm and native_layer_norm_backward over rows [R, N]: one warp per
// row sums its statistics in double (mean, then squared deviations, as the CPU kernel) and writes
// the row with ops/layer_norm_math.h; the weight and bias gradients sum over rows in two passes
// (blocks of kLayerNormRowsPerPartial rows, then the blocks in order), so no atomics and a fixed order.
#include "ops/cuda/loops.cuh"
#include "ops/layer_norm_math.h"

namespace tr::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// the stats type: float for f16 / bf16 / f32 rows, double for f64
template <typename T> using stat_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
__global__ void layer_norm_kernel(int64_t R, int64_t N, double eps, const T* x, const T* w, const T* b, T* y,
                                  stat_t<T>* mean_out, stat_t<T>* rstd_out) {
  using A = acc_t<T>;
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= R) return;
  const T* xr = x + r * N;
  double s = 0;
  for (int64_t j = lane; j < N; j += 32) s += double(A(xr[j]));
  const double mean = warp_sum(s) / double(N);
  double q = 0;
  for (int64_t j = lane; j < N; j += 32) {
    const double d = double(A(xr[j])) - mean;
    q += d * d;
  }
  const double rstd = ln::rstd_of(warp_sum(q) / double(N), eps);
  if (lane == 0) {
    mean_out[r] = stat_t<T>(mean);
    rstd_out[r] = stat_t<T>(rstd);
  }
  const A m = A(stat_t<T>(mean)), rs = A(stat_t<T>(rstd));
  T* yr = y + r * N;
  for (int64_t j = lane; j < N; j += 32) yr[j] = T(ln::normalize(A(xr[j]), m, rs, A(w[j]), A(b[j])));
}

template <typename T>
__global__ void layer_norm_grad_input_kernel(int64_t R, int64_t N, const T* gy, const T* x, const T* w,
                                             const stat_t<T>* mean, const stat_t<T>* rstd, T* gx) {
  using A = acc_t<T>;
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= R) return;
  const T *gr = gy + r * N, *xr = x + r * N;
  const A m = A(mean[r]), rs = A(rstd[r]);
  double sg = 0, sgx = 0;
  for (int64_t j = lane; j < N; j += 32) {
    const double g = double(A(gr[j]) * A(w[j]));
    sg += g;
    sgx += g * double((A(xr[j]) - m) * rs);
  }
  const A a = A(warp_sum(sg) / double(N)), c = A(warp_sum(sgx) / double(N));
  T* gxr = gx + r * N;
  for (int64_t j = lane; j < N; j += 32) gxr[j] = T(ln::grad_input(A(gr[j]), A(xr[j]), A(w[j]), m, rs, a, c));
}

// partial[p][j] = S over rows [p P, (p + 1) P) of gy xhat, and partial[chunks + p][j] of gy
template <typename T>
__global__ void layer_norm_grad_partial_kernel(int64_t R, int64_t N, const T* gy, const T* x, const stat_t<T>* mean,
                                               const stat_t<T>* rstd, double* partial, int64_t chunks) {
  using A = acc_t<T>;
  const int64_t p = blockIdx.y;
  const int64_t r0 = p * kLayerNormRowsPerPartial, r1 = r0 + kLayerNormRowsPerPartial < R ? r0 + kLayerNormRowsPerPartial : R;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < N; j += int64_t(blockDim.x) * gridDim.x) {
    double sw = 0, sb = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const A g = A(gy[r * N + j]);
      sw += double(g * ((A(x[r * N + j]) - A(mean[r])) * A(rstd[r])));
      sb += double(g);
    }
    partial[p * N + j] = sw;
    partial[(chunks + p) * N + j] = sb;
  }
}

template <typename T>
__global__ void layer_norm_grad_sum_kernel(int64_t N, const double* partial, int64_t chunks, T* gw, T* gb) {
  using A = acc_t<T>;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < N; j += int64_t(blockDim.x) * gridDim.x) {
    double sw = 0, sb = 0;
    for (int64_t p = 0; p < chunks; ++p) {
      sw += partial[p * N + j];
      sb += partial[(chunks + p) * N + j];
    }
    gw[j] = T(A(sw));
    gb[j] = T(A(sb));
  }
}

}  // namespace

void launch_layer_norm(DType t, int64_t R, int64_t N, double eps, const void* x, const void* w, const void* b, void* y,
                       void* mean, void* rstd) {
  if (R == 0) return;
  const unsigned blocks = unsigned((R + kWarpsPerBlock - 1) / kWarpsPerBlock);
  TR_DISPATCH_FLOAT(t, "native_layer_norm", [&] {
    using T = scalar_t;
    launch_kernel(layer_norm_kernel<T>, blocks, 32 * kWarpsPerBlock, R, N, eps, static_cast<const T*>(x), static_cast<const T*>(w),
                                                          static_cast<const T*>(b), static_cast<T*>(y),
                                                          static_cast<stat_t<T>*>(mean), static_cast<stat_t<T>*>(rstd));
    TR_CUDA_CHECK_LAUNCH("layer_norm_kernel");
  });
}

void launch_layer_norm_backward(DType t, int64_t R, int64_t N, const void* gy, const void* x, const void* w,
                                const void* mean, const void* rstd, void* gx, void* gw, void* gb, double* partial) {
  if (N == 0) return;
  const int64_t chunks = (R + kLayerNormRowsPerPartial - 1) / kLayerNormRowsPerPartial;
  TR_DISPATCH_FLOAT(t, "native_layer_norm_backward", [&] {
    using T = scalar_t;
    using S = stat_t<T>;
    const T *pgy = static_cast<const T*>(gy), *px = static_cast<const T*>(x);
    const S *pm = static_cast<const S*>(mean), *pr = static_cast<const S*>(rstd);
    if (R > 0) {
      const unsigned blocks = unsigned((R + kWarpsPerBlock - 1) / kWarpsPerBlock);
      launch_kernel(layer_norm_grad_input_kernel<T>, blocks, 32 * kWarpsPerBlock, R, N, pgy, px, static_cast<const T*>(w), pm, pr,
                                                                       static_cast<T*>(gx));
      TR_CUDA_CHECK_LAUNCH("layer_norm_grad_input_kernel");
      const dim3 grid(unsigned(std::min<int64_t>((N + kThreads - 1) / kThreads, 65535)), unsigned(chunks));
      launch_kernel(layer_norm_grad_partial_kernel<T>, grid, kThreads, R, N, pgy, px, pm, pr, partial, chunks);
      TR_CUDA_CHECK_LAUNCH("layer_norm_grad_partial_kernel");
    }
    launch_kernel(layer_norm_grad_sum_kernel<T>, grid_for(N), kThreads, N, partial, chunks, static_cast<T*>(gw),
                                                             static_cast<T*>(gb));
    TR_CUDA_CHECK_LAUNCH("layer_norm_grad_sum_kernel");
  });
}

}  // namespace tr::cuda
