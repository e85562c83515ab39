// CUDA kernels of batch_norm, batch_norm_backward and batch_norm_elemt over x as [N, C, L]: one
// block per channel sums its N L values in double (mean, then squared deviations: two passes, as
// the CPU kernel), writes the channel's coefficients (ops/batch_norm_math.h), and an elementwise
// kernel applies them. The fused batch norm + relu + max pool (ops/batch_norm_relu_pool.cpp) takes
// the same statistics, then pools relu(x alpha + beta) one thread per output; its backward runs the
// same two kernels as batch_norm_backward, reading the gradient below the pool and the relu where
// they read gy (gathered from the windows over each position, as max_pool2d_backward's kernel).
#include "ops/batch_norm_math.h"
#include "ops/cuda/loops.cuh"
#include "ops/pool_math.h"
#include "ops/scalar_math.h"

namespace tr::cuda {

namespace {

constexpr int kStatThreads = 512;

// The sum of v over the block (every thread gets it).
__device__ double block_sum(double v) {
  __shared__ double warp_sums[kStatThreads / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // warp_sums may still be read by an earlier call
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  double s = 0;
  for (int i = 0; i < int(blockDim.x >> 5); ++i) s += warp_sums[i];
  return s;
}

// value j of channel c: n = j / L, l = j % L
__device__ __forceinline__ int64_t nc_offset(const BatchNormGeom& g, int64_t c, int64_t j) {
  const int64_t n = j / g.L;
  return (n * g.C + c) * g.L + (j - n * g.L);
}

template <typename T> __device__ __forceinline__ double at(const T* p, int64_t i) { return double(acc_t<T>(p[i])); }

template <typename T> __global__ void batch_norm_stats_kernel(BatchNormGeom g, const T* x, const T* w, const T* b,
                                                              T* mean_out, T* var_out, double* coef) {
  const int64_t c = blockIdx.x, M = g.N * g.L;
  double s = 0;
  for (int64_t j = threadIdx.x; j < M; j += blockDim.x) s += at(x, nc_offset(g, c, j));
  const double mean = block_sum(s) / double(M);
  s = 0;
  for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
    const double d = at(x, nc_offset(g, c, j)) - mean;
    s += d * d;
  }
  const double var = block_sum(s) / double(M);
  if (threadIdx.x == 0) {
    mean_out[c] = T(acc_t<T>(mean));
    var_out[c] = T(acc_t<T>(var));
    bn::affine_coefficients(at(w, c), at(b, c), mean, var, g.eps, &coef[2 * c], &coef[2 * c + 1]);
  }
}

// alpha, beta of each channel from given statistics (one thread per channel)
template <typename T> __global__ void batch_norm_coef_kernel(BatchNormGeom g, const T* w, const T* b, const T* mean,
                                                             const T* var, double* coef) {
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < g.C; c += int64_t(blockDim.x) * gridDim.x)
    bn::affine_coefficients(at(w, c), at(b, c), at(mean, c), at(var, c), g.eps, &coef[2 * c], &coef[2 * c + 1]);
}

template <typename T> __global__ void batch_norm_affine_kernel(BatchNormGeom g, const T* x, T* y, const double* coef) {
  using A = acc_t<T>;
  const int64_t n = g.N * g.C * g.L;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t c = (i / g.L) % g.C;
    y[i] = T(bn::affine(A(x[i]), A(coef[2 * c]), A(coef[2 * c + 1])));
  }
}

// The gradient reaching batch_norm's output: gy itself, or (GradBelowPool) the gradient below a relu
// and a max pool. Each returns the value at flat position o of [N, C, L] as a T.
template <typename T> struct DenseGrad {
  const T* gy;
  __device__ T operator()(int64_t o) const { return gy[o]; }
};
template <typename T> struct GradBelowPool {
  const T *gy, *y;  // the pool's gradient and output, [N, C, OH, OW]
  const int64_t* idx;
  pool::Geom g;  // planes of H x W = L
  __device__ T operator()(int64_t o) const {
    const int64_t plane = o / (g.H * g.W), rem = o - plane * g.H * g.W, off = plane * g.OH * g.OW;
    return T(pool::max_backward_at<acc_t<T>>(gy + off, idx + off, g, rem / g.W, rem % g.W, y + off));
  }
};

template <typename T, typename G> __global__ void batch_norm_grad_sums_kernel(BatchNormGeom g, G gy, const T* x,
                                                                              const T* w, const T* mean, const T* var,
                                                                              T* gw, T* gb, double* coef) {
  const int64_t c = blockIdx.x, M = g.N * g.L;
  const double m = at(mean, c);
  double s_g = 0, s_gxmu = 0;
  for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
    const int64_t o = nc_offset(g, c, j);
    const double v = double(acc_t<T>(gy(o)));
    s_g += v;
    s_gxmu += v * (at(x, o) - m);
  }
  s_g = block_sum(s_g);
  s_gxmu = block_sum(s_gxmu);
  if (threadIdx.x == 0) {
    const bn::GradCoefficients q = bn::grad_coefficients(s_g, s_gxmu, at(var, c), at(w, c), g.eps, double(M));
    gb[c] = T(acc_t<T>(q.gb));
    gw[c] = T(acc_t<T>(q.gw));
    coef[4 * c] = q.k;
    coef[4 * c + 1] = q.grad_mean;
    coef[4 * c + 2] = m;
    coef[4 * c + 3] = q.scale;
  }
}

template <typename T, typename G>
__global__ void batch_norm_grad_input_kernel(BatchNormGeom g, G gy, const T* x, T* gx, const double* coef) {
  using A = acc_t<T>;
  const int64_t n = g.N * g.C * g.L;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x) {
    const double* q = coef + 4 * ((i / g.L) % g.C);
    gx[i] = T(bn::grad_input(A(gy(i)), A(x[i]), A(q[0]), A(q[1]), A(q[2]), A(q[3])));
  }
}

// y = the max over each window of relu(x alpha + beta) (the affine rounded to T, as batch_norm's
// output is), idx its flat argmax in the plane; one thread per output
template <typename T> struct ReluAffineValues {
  const T* xp;
  acc_t<T> alpha, beta;
  __device__ acc_t<T> operator()(int64_t i) const {
    using A = acc_t<T>;
    return A(T(math::relu(A(T(bn::affine(A(xp[i]), alpha, beta))))));
  }
};
template <typename T> __global__ void batch_norm_relu_max_pool2d_kernel(pool::Geom g, int64_t C, const T* x, T* y,
                                                                        int64_t* idx, const double* coef) {
  using A = acc_t<T>;
  const int64_t n = g.planes * g.OH * g.OW;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t plane = i / (g.OH * g.OW), rem = i - plane * g.OH * g.OW, c = plane % C;
    const ReluAffineValues<T> v{x + plane * g.H * g.W, A(coef[2 * c]), A(coef[2 * c + 1])};
    y[i] = T(pool::max_window_of<A>(v, g, rem / g.OW, rem % g.OW, idx + i));
  }
}

// The statistics kernel: mean, var and the affine coefficients of each channel
template <typename T> void launch_statistics(const BatchNormGeom& g, const void* x, const void* w, const void* b,
                                             void* mean_out, void* var_out, double* coef) {
  launch_kernel(batch_norm_stats_kernel<T>, unsigned(g.C), kStatThreads, g, static_cast<const T*>(x),
                static_cast<const T*>(w), static_cast<const T*>(b), static_cast<T*>(mean_out), static_cast<T*>(var_out),
                coef);
  TR_CUDA_CHECK_LAUNCH("batch_norm_stats_kernel");
}

// batch_norm's backward from the gradient source gy (DenseGrad or GradBelowPool)
template <typename T, typename G> void launch_grad(const BatchNormGeom& g, const G& gy, const void* x, const void* w,
                                                   const void* mean, const void* var, void* gx, void* gw, void* gb,
                                                   double* coef) {
  launch_kernel(batch_norm_grad_sums_kernel<T, G>, unsigned(g.C), kStatThreads, g, gy, static_cast<const T*>(x),
                static_cast<const T*>(w), static_cast<const T*>(mean), static_cast<const T*>(var), static_cast<T*>(gw),
                static_cast<T*>(gb), coef);
  TR_CUDA_CHECK_LAUNCH("batch_norm_grad_sums_kernel");
  if (g.N * g.C * g.L == 0) return;
  launch_kernel(batch_norm_grad_input_kernel<T, G>, grid_for(g.N * g.C * g.L), kThreads, g, gy,
                static_cast<const T*>(x), static_cast<T*>(gx), coef);
  TR_CUDA_CHECK_LAUNCH("batch_norm_grad_input_kernel");
}

}  // namespace

void launch_batch_norm(DType t, const BatchNormGeom& g, const void* x, const void* w, const void* b, void* y,
                       void* mean_out, void* var_out, double* coef) {
  if (g.C == 0) return;
  const int64_t n = g.N * g.C * g.L;
  TR_DISPATCH_FLOAT(t, "batch_norm", [&] {
    using T = scalar_t;
    launch_statistics<T>(g, x, w, b, mean_out, var_out, coef);
    if (n == 0) return;
    launch_kernel(batch_norm_affine_kernel<T>, grid_for(n), kThreads, g, static_cast<const T*>(x), static_cast<T*>(y),
                  coef);
    TR_CUDA_CHECK_LAUNCH("batch_norm_affine_kernel");
  });
}

void launch_batch_norm_backward(DType t, const BatchNormGeom& g, const void* gy, const void* x, const void* w,
                                const void* mean, const void* var, void* gx, void* gw, void* gb, double* coef) {
  if (g.C == 0) return;
  TR_DISPATCH_FLOAT(t, "batch_norm_backward", [&] {
    using T = scalar_t;
    launch_grad<T>(g, DenseGrad<T>{static_cast<const T*>(gy)}, x, w, mean, var, gx, gw, gb, coef);
  });
}

void launch_batch_norm_elemt(DType t, const BatchNormGeom& g, const void* x, const void* w, const void* b,
                             const void* mean, const void* var, void* y, double* coef) {
  if (g.C == 0) return;
  const int64_t n = g.N * g.C * g.L;
  TR_DISPATCH_FLOAT(t, "batch_norm_elemt", [&] {
    using T = scalar_t;
    launch_kernel(batch_norm_coef_kernel<T>, grid_for(g.C), kThreads, g, static_cast<const T*>(w),
                  static_cast<const T*>(b), static_cast<const T*>(mean), static_cast<const T*>(var), coef);
    TR_CUDA_CHECK_LAUNCH("batch_norm_coef_kernel");
    if (n == 0) return;
    launch_kernel(batch_norm_affine_kernel<T>, grid_for(n), kThreads, g, static_cast<const T*>(x), static_cast<T*>(y),
                  coef);
    TR_CUDA_CHECK_LAUNCH("batch_norm_affine_kernel");
  });
}

void launch_batch_norm_relu_max_pool2d(DType t, const BatchNormGeom& g, const pool::Geom& pg, const void* x,
                                       const void* w, const void* b, void* y, int64_t* idx, void* mean_out,
                                       void* var_out, double* coef) {
  if (g.C == 0) return;
  const int64_t n = pg.planes * pg.OH * pg.OW;
  TR_DISPATCH_FLOAT(t, "batch_norm_relu_max_pool2d", [&] {
    using T = scalar_t;
    launch_statistics<T>(g, x, w, b, mean_out, var_out, coef);
    if (n == 0) return;
    launch_kernel(batch_norm_relu_max_pool2d_kernel<T>, grid_for(n), kThreads, pg, g.C, static_cast<const T*>(x),
                  static_cast<T*>(y), idx, coef);
    TR_CUDA_CHECK_LAUNCH("batch_norm_relu_max_pool2d_kernel");
  });
}

void launch_batch_norm_relu_max_pool2d_backward(DType t, const BatchNormGeom& g, const pool::Geom& pg, const void* gy,
                                                const void* x, const void* w, const void* mean, const void* var,
                                                const void* y, const int64_t* idx, void* gx, void* gw, void* gb,
                                                double* coef) {
  if (g.C == 0) return;
  TR_DISPATCH_FLOAT(t, "batch_norm_relu_max_pool2d_backward", [&] {
    using T = scalar_t;
    const GradBelowPool<T> below{static_cast<const T*>(gy), static_cast<const T*>(y), idx, pg};
    launch_grad<T>(g, below, x, w, mean, var, gx, gw, gb, coef);
  });
}

}  // namespace tr::cuda
