// CUDA kernel of _fused_cast: one block per chunk of one tensor, each element converted by the
// CPU's rules (core/convert.h through loops.cuh's conversions, as the one-tensor cast kernel).
#include "ops/cuda/fused_cast_launch.h"
#include "ops/cuda/loops.cuh"

namespace tr::cuda {

namespace {

template <typename From, typename To>
__global__ void fused_cast_kernel(const CastTensor* tensors, const CastChunk* chunks) {
  const CastChunk c = chunks[blockIdx.x];
  const CastTensor& t = tensors[c.tensor];
  const From* x = static_cast<const From*>(t.src);
  To* y = static_cast<To*>(t.dst);
  const int64_t end = c.start + kCastChunk < t.numel ? c.start + kCastChunk : t.numel;
  for (int64_t k = c.start + threadIdx.x; k < end; k += blockDim.x) y[k] = convert<To>(x[k]);
}

}  // namespace

void launch_fused_cast(DType from, DType to, const CastTensor* tensors, const CastChunk* chunks, int64_t n_chunks) {
  if (n_chunks == 0) return;
  TR_DISPATCH_FLOAT(from, "_fused_cast", [&] {
    using F = scalar_t;
    TR_DISPATCH_FLOAT(to, "_fused_cast", [&] {
      launch_kernel(fused_cast_kernel<F, scalar_t>, unsigned(n_chunks), kThreads, tensors, chunks);
      TR_CUDA_CHECK_LAUNCH("fused_cast_kernel");
    });
  });
}

}  // namespace tr::cuda
