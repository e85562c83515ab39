// Launchers of the fused clipping kernels (ops/cuda/fused_clip_kernels.cu): a table of the
// tensors and one of their chunks of clip_math::kNormChunk elements, on the device.
#pragma once
#include <cstdint>
#include "core/dtype.h"

namespace tr::cuda {

struct NormTensor {
  void* ptr = nullptr;
  int64_t numel = 0;
  int64_t chunk_begin = 0;  // the tensor's first entry in the chunk table (its chunks are consecutive)
};
struct NormChunk {
  int32_t tensor = 0;
  int64_t start = 0;
};

// total (0-dim, dtype t) = the norm of the n tensors' norms; partial: n_chunks scratch values of acc_t<t>
void launch_fused_total_norm(DType t, double norm_type, const NormTensor* tensors, int64_t n, const NormChunk* chunks,
                             int64_t n_chunks, void* partial, void* total);
// every chunk's elements times clip_coef(*total, max_norm)
void launch_fused_clip_scale(DType t, double max_norm, const NormTensor* tensors, const NormChunk* chunks,
                             int64_t n_chunks, const void* total);

}  // namespace tr::cuda
