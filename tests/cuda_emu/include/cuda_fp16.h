// cuda_fp16.h as the CUDA emulator provides it (tests/cuda_emu): __half as a storage type, two
// bytes of IEEE binary16, converting to and from float with round to nearest even. Only what the
// project's kernels use (wmma's fragments of __half, mma.h).
#pragma once
#include <cstdint>
#include "../half_convert.h"

struct __half {
  uint16_t __x = 0;
  __half() = default;
  __half(float f) : __x(cuda_emu::float_to_half(f)) {}
  operator float() const { return cuda_emu::half_to_float(__x); }
};
inline float __half2float(__half h) { return float(h); }
inline __half __float2half(float f) { return __half(f); }
