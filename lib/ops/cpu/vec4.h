// Four consecutive values as four double lanes (GCC vector extensions): the sums that the CPU
// kernels keep in double (batch norm's statistics, column sums, layer norm's weight gradients)
// load through these. bf16 widens to f32 exactly, then to double.
#pragma once
#include <cstdint>
#include <cstring>
#include "core/half.h"

namespace tr::cpu {

typedef double d4 __attribute__((vector_size(32)));
typedef float f4 __attribute__((vector_size(16)));

inline f4 load_f4(const float* p) {
  f4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline d4 load4_as_double(const float* p) { return __builtin_convertvector(load_f4(p), d4); }
inline d4 load4_as_double(const double* p) {
  d4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline d4 load4_as_double(const BFloat16* p) {
  typedef uint16_t h4 __attribute__((vector_size(8)));
  typedef uint32_t u4 __attribute__((vector_size(16)));
  h4 h;
  std::memcpy(&h, p, sizeof h);
  const u4 bits = __builtin_convertvector(h, u4) << 16;
  f4 v;
  std::memcpy(&v, &bits, sizeof v);
  return __builtin_convertvector(v, d4);
}

}  // namespace tr::cpu
