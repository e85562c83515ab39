// Launcher of _fused_cast's multi-tensor kernel (ops/cuda/fused_cast_kernels.cu): a table of the
// tensors and one of their chunks of kCastChunk elements, on the device; one launch per pair of
// dtypes.
#pragma once
#include <cstdint>
#include "core/dtype.h"

namespace tr::cuda {

constexpr int64_t kCastChunk = 65536;
struct CastTensor {
  const void* src = nullptr;
  void* dst = nullptr;
  int64_t numel = 0;
};
struct CastChunk {
  int32_t tensor = 0;
  int64_t start = 0;
};
// dst = cast(src) of every chunk, from dtype `from` to `to`
void launch_fused_cast(DType from, DType to, const CastTensor* tensors, const CastChunk* chunks, int64_t n_chunks);

}  // namespace tr::cuda
