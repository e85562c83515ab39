// cuda_bf16.h as the CUDA emulator provides it (tests/cuda_emu): __nv_bfloat16 as a storage type,
// the high two bytes of an IEEE binary32, converting from float with round to nearest even. Only
// what the project's kernels use (wmma's fragments of __nv_bfloat16, mma.h).
#pragma once
#include <cstdint>
#include "../half_convert.h"

struct __nv_bfloat16 {
  uint16_t __x = 0;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) : __x(cuda_emu::float_to_bf16(f)) {}
  operator float() const { return cuda_emu::bf16_to_float(__x); }
};
inline float __bfloat162float(__nv_bfloat16 h) { return float(h); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
