// CUDA kernels of the Philox random fills: element i of a draw is the same pure function of
// (seed, offset, i) as on the CPU (core/philox.h), so both devices draw the same numbers.
#include "core/philox.h"
#include "ops/cuda/loops.cuh"

namespace tr::cuda {

namespace {

// out[i] = T(value_i) for i < n (out contiguous); values computed in double as the CPU kernel.
template <typename T>
__global__ void random_kernel(T* out, int64_t n, uint64_t seed, uint64_t offset, RandomOp op, double p0, double p1) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x) {
    const uint64_t k = uint64_t(i);
    double v = 0;
    switch (op) {
      // low + (high - low) U and mean + std N as one fused multiply-add each: the CPU build
      // (-march=haswell, -ffp-contract=fast) contracts them so, and the bits must agree.
      case RandomOp::Uniform: v = fma(p1 - p0, philox_uniform_at(seed, offset, k), p0); break;
      case RandomOp::Normal: v = fma(p1, philox_normal_at(seed, offset, k), p0); break;
      case RandomOp::DropoutMask: v = philox_uniform_at(seed, offset, k) >= p0 ? p1 : 0.0; break;
    }
    out[i] = T(acc_t<T>(v));
  }
}

}  // namespace

void launch_random(RandomOp op, DType t, void* out, int64_t n, uint64_t seed, uint64_t offset, double p0, double p1) {
  if (n == 0) return;
  TR_DISPATCH_FLOAT(t, "random", [&] {
    launch_kernel(random_kernel<scalar_t>, grid_for(n), kThreads, static_cast<scalar_t*>(out), n, seed, offset, op, p0,
                  p1);
    TR_CUDA_CHECK_LAUNCH("random_kernel");
  });
}

}  // namespace tr::cuda
