// CUDA kernels of max_pool2d, avg_pool2d and their backward ops: one thread per output (forward)
// or per input element (backward, gathering from the windows over it, so no atomics and the
// CPU's summation order), with the window math of ops/pool_math.h that the CPU kernels share.
#include "ops/cuda/loops.cuh"

namespace tr::cuda {

namespace {

// (plane, row, column) of linear index i over planes of h x w
struct At {
  int64_t p, r, c;
};
__device__ __forceinline__ At at(int64_t i, int64_t h, int64_t w) {
  const int64_t plane = i / (h * w), rem = i - plane * h * w;
  return {plane, rem / w, rem - (rem / w) * w};
}

template <typename T> __global__ void max_pool2d_kernel(pool::Geom g, const T* x, T* y, int64_t* idx) {
  const int64_t n = g.planes * g.OH * g.OW;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x) {
    const At o = at(i, g.OH, g.OW);
    y[i] = T(pool::max_window<acc_t<T>>(x + o.p * g.H * g.W, g, o.r, o.c, idx + i));
  }
}

template <typename T>
__global__ void max_pool2d_backward_gather_kernel(pool::Geom g, const T* gy, const int64_t* idx, T* gx) {
  const int64_t n = g.planes * g.H * g.W;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x) {
    const At x = at(i, g.H, g.W);
    const int64_t off = x.p * g.OH * g.OW;
    gx[i] = T(pool::max_backward_at<acc_t<T>>(gy + off, idx + off, g, x.r, x.c));
  }
}

// One thread per plane: zero it, then add each output's gradient at its index, in output order.
template <typename T> __global__ void max_pool2d_backward_scatter_kernel(pool::Geom g, const T* gy, const int64_t* idx,
                                                                         T* gx, unsigned long long* error) {
  const int64_t HW = g.H * g.W, P = g.OH * g.OW;
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < g.planes; p += int64_t(blockDim.x) * gridDim.x) {
    T* xp = gx + p * HW;
    for (int64_t k = 0; k < HW; ++k) xp[k] = T(0.0f);
    for (int64_t o = 0; o < P; ++o) {
      const int64_t k = idx[p * P + o];
      if (k < 0 || k >= HW) {
        atomicMin(error, static_cast<unsigned long long>(p * P + o));
        continue;
      }
      xp[k] = T(acc_t<T>(xp[k]) + acc_t<T>(gy[p * P + o]));
    }
  }
}

template <typename T> __global__ void avg_pool2d_kernel(pool::Geom g, bool cip, const T* x, T* y) {
  const int64_t n = g.planes * g.OH * g.OW;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x) {
    const At o = at(i, g.OH, g.OW);
    y[i] = T(pool::avg_at<acc_t<T>>(x + o.p * g.H * g.W, g, o.r, o.c, cip));
  }
}

template <typename T> __global__ void avg_pool2d_backward_kernel(pool::Geom g, bool cip, const T* gy, T* gx) {
  const int64_t n = g.planes * g.H * g.W;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x) {
    const At x = at(i, g.H, g.W);
    gx[i] = T(pool::avg_backward_at<acc_t<T>>(gy + x.p * g.OH * g.OW, g, x.r, x.c, cip));
  }
}

}  // namespace

void launch_max_pool2d(DType t, const pool::Geom& g, const void* x, void* y, int64_t* idx) {
  const int64_t n = g.planes * g.OH * g.OW;
  if (n == 0) return;
  TR_DISPATCH_FLOAT(t, "max_pool2d", [&] {
    launch_kernel(max_pool2d_kernel<scalar_t>, grid_for(n), kThreads, g, static_cast<const scalar_t*>(x),
                  static_cast<scalar_t*>(y), idx);
    TR_CUDA_CHECK_LAUNCH("max_pool2d_kernel");
  });
}

void launch_max_pool2d_backward(DType t, const pool::Geom& g, bool windows, const void* gy, const int64_t* idx,
                                void* gx, unsigned long long* error) {
  const int64_t n = g.planes * g.H * g.W;
  if (n == 0) return;
  TR_DISPATCH_FLOAT(t, "max_pool2d_backward", [&] {
    auto pgy = static_cast<const scalar_t*>(gy);
    auto pgx = static_cast<scalar_t*>(gx);
    if (windows) {
      launch_kernel(max_pool2d_backward_gather_kernel<scalar_t>, grid_for(n), kThreads, g, pgy, idx, pgx);
      TR_CUDA_CHECK_LAUNCH("max_pool2d_backward_gather_kernel");
    } else {
      launch_kernel(max_pool2d_backward_scatter_kernel<scalar_t>, grid_for(g.planes), kThreads, g, pgy, idx, pgx,
                    error);
      TR_CUDA_CHECK_LAUNCH("max_pool2d_backward_scatter_kernel");
    }
  });
}

void launch_avg_pool2d(DType t, const pool::Geom& g, bool count_include_pad, const void* x, void* y) {
  const int64_t n = g.planes * g.OH * g.OW;
  if (n == 0) return;
  TR_DISPATCH_FLOAT(t, "avg_pool2d", [&] {
    launch_kernel(avg_pool2d_kernel<scalar_t>, grid_for(n), kThreads, g, count_include_pad,
                  static_cast<const scalar_t*>(x), static_cast<scalar_t*>(y));
    TR_CUDA_CHECK_LAUNCH("avg_pool2d_kernel");
  });
}

void launch_avg_pool2d_backward(DType t, const pool::Geom& g, bool count_include_pad, const void* gy, void* gx) {
  const int64_t n = g.planes * g.H * g.W;
  if (n == 0) return;
  TR_DISPATCH_FLOAT(t, "avg_pool2d_backward", [&] {
    launch_kernel(avg_pool2d_backward_kernel<scalar_t>, grid_for(n), kThreads, g, count_include_pad,
                  static_cast<const scalar_t*>(gy), static_cast<scalar_t*>(gx));
    TR_CUDA_CHECK_LAUNCH("avg_pool2d_backward_kernel");
  });
}

}  // namespace tr::cuda
