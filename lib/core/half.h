// IEEE binary16 (Half) and bfloat16 (BFloat16) storage types; conversions round to nearest even.
#pragma once
#include <cstdint>
#include <cstring>
#include "core/macros.h"
#if defined(__F16C__) && !defined(__CUDA_ARCH__)
#define TR_HAVE_F16C 1  // x86 F16C: one instruction each way, the same IEEE rounding
#if defined(__CUDACC__)
#include <immintrin.h>
#define TR_F16C_FROM_FLOAT(f) _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)
#define TR_F16C_TO_FLOAT(h) _cvtsh_ss(h)
#else
// GCC's and clang's builtins behind _cvtss_sh / _cvtsh_ss, without <immintrin.h> (72,000 lines
// that every file including a tensor would parse)
using tr_f16c_v4sf = float __attribute__((vector_size(16)));
using tr_f16c_v8hi = short __attribute__((vector_size(16)));
#define TR_F16C_FROM_FLOAT(f) \
  uint16_t(__builtin_ia32_vcvtps2ph(tr_f16c_v4sf{(f), 0.f, 0.f, 0.f}, 0 /* _MM_FROUND_TO_NEAREST_INT */)[0])
#define TR_F16C_TO_FLOAT(h) __builtin_ia32_vcvtph2ps(tr_f16c_v8hi{short(h), 0, 0, 0, 0, 0, 0, 0})[0]
#endif
#endif

namespace tr {

TR_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
TR_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// f32 -> bf16: keep the high 16 bits, rounding the dropped 16 to nearest even; NaN stays quiet NaN.
TR_HD uint16_t float_to_bf16_bits(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
TR_HD float bf16_bits_to_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }

// f32 -> f16 with round-to-nearest-even, subnormals, overflow to inf, NaN preserved.
TR_HD uint16_t float_to_half_bits(float f) {
#if defined(TR_HAVE_F16C)
  return uint16_t(TR_F16C_FROM_FLOAT(f));
#endif
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((absx >> 13) & 0x3ffu));  // NaN
  if (absx >= 0x477ff000u) return uint16_t(sign | 0x7c00u);                           // rounds to >= 65520 -> inf
  if (absx < 0x38800000u) {                                                           // result is subnormal or zero
    if (absx < 0x33000000u) return uint16_t(sign);                                    // < 2^-25 rounds to 0
    uint32_t e = absx >> 23;
    uint32_t m = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;  // 14 + (113 - e) ... mantissa shift into subnormal range
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) r += 1u;
    return uint16_t(sign | r);
  }
  uint32_t r = absx - 0x38000000u;  // rebias exponent 127 -> 15
  uint32_t rounded = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
  return uint16_t(sign | rounded);
}
TR_HD float half_bits_to_float(uint16_t h) {
#if defined(TR_HAVE_F16C)
  return TR_F16C_TO_FLOAT(h);
#endif
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 0x1fu) return bits_float(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    if (m == 0) return bits_float(sign);
    // subnormal: value = m * 2^-24
    float v = float(m) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

struct Half {
  uint16_t x = 0;
  Half() = default;
  TR_HD Half(float f) : x(float_to_half_bits(f)) {}
  TR_HD operator float() const { return half_bits_to_float(x); }
  static TR_HD Half from_bits(uint16_t b) {
    Half h;
    h.x = b;
    return h;
  }
};

struct BFloat16 {
  uint16_t x = 0;
  BFloat16() = default;
  TR_HD BFloat16(float f) : x(float_to_bf16_bits(f)) {}
  TR_HD operator float() const { return bf16_bits_to_float(x); }
  static TR_HD BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.x = b;
    return h;
  }
};

}  // namespace tr
