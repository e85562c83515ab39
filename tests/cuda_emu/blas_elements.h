// Elements of the emulated BLAS libraries' matrices (cuBLAS, cuBLASLt): sizes of the storage types,
// f16 / bf16 / f32 elements read as f32 and written back with one rounding, and the extent of a
// column-major operand.
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include "half_convert.h"

namespace cuda_emu {

inline size_t elem_size(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    case CUDA_R_32F: return 4;
    case CUDA_R_64F: return 8;
    default: return 0;
  }
}

// Element i of an f16 / bf16 / f32 array as f32 (0 for other types).
inline float load_as_float(const void* p, cudaDataType_t t, size_t i) {
  const auto* b = static_cast<const unsigned char*>(p) + i * elem_size(t);
  uint16_t u;
  switch (t) {
    case CUDA_R_16F: std::memcpy(&u, b, 2); return half_to_float(u);
    case CUDA_R_16BF: std::memcpy(&u, b, 2); return bf16_to_float(u);
    case CUDA_R_32F: {
      float f;
      std::memcpy(&f, b, 4);
      return f;
    }
    default: return 0;
  }
}

// Stores v as element i of an f16 / bf16 / f32 array, rounded to nearest even.
inline void store_from_float(void* p, cudaDataType_t t, size_t i, float v) {
  auto* b = static_cast<unsigned char*>(p) + i * elem_size(t);
  uint16_t u;
  switch (t) {
    case CUDA_R_16F:
      u = float_to_half(v);
      std::memcpy(b, &u, 2);
      break;
    case CUDA_R_16BF:
      u = float_to_bf16(v);
      std::memcpy(b, &u, 2);
      break;
    case CUDA_R_32F: std::memcpy(b, &v, 4); break;
    default: break;
  }
}

// Elements a column-major operand spans: `rows` x `cols` stored with leading dimension ld.
inline size_t col_major_span(int64_t rows, int64_t cols, int64_t ld) {
  return cols == 0 || rows == 0 ? 0 : size_t(ld) * size_t(cols - 1) + size_t(rows);
}

}  // namespace cuda_emu
