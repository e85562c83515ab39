// Vectorised f32 transcendental functions for contiguous tensors, through glibc's libmvec
// (8-lane AVX2 variants of expf/logf/tanhf; accurate to a few ulp). Used by the CPU kernels of
// exp, log, tanh, erf, gelu, sigmoid and silu; other dtypes and strided tensors take the scalar loop.
#pragma once
#include <immintrin.h>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include "ops/cpu/loops.h"

extern "C" {
__m256 _ZGVdN8v_expf(__m256);
__m256 _ZGVdN8v_logf(__m256);
__m256 _ZGVdN8v_tanhf(__m256);
__m256 _ZGVdN8v_erff(__m256);
}

namespace tr::cpu {

inline __m256 exp8(__m256 v) { return _ZGVdN8v_expf(v); }
inline __m256 log8(__m256 v) { return _ZGVdN8v_logf(v); }
inline __m256 tanh8(__m256 v) { return _ZGVdN8v_tanhf(v); }
inline __m256 erf8(__m256 v) { return _ZGVdN8v_erff(v); }
inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}
inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// exp(v) for v <= 0 (or NaN), as softmax needs. libmvec's expf leaves lanes below -87.3 (where the
// result is denormal or 0, e.g. every -inf of a causal mask) to scalar expf, calling it lane by
// lane: 5x slower on masked rows. Here -inf and v < -104 give 0 directly; only lanes in
// [-104, -87) (denormal results) go through scalar expf.
inline __m256 exp8_nonpositive(__m256 v) {
  const __m256 lo = _mm256_set1_ps(-87.0f);
  __m256 r = exp8(_mm256_max_ps(lo, v));  // max_ps returns v where v is NaN
  const int under = _mm256_movemask_ps(_mm256_cmp_ps(v, lo, _CMP_LT_OQ));
  if (under == 0) return r;
  // lanes below -104 (a mask's -inf) are 0 in the vector itself; lanes in [-104, -87) are rare
  const __m256 zero_lanes = _mm256_cmp_ps(v, _mm256_set1_ps(-104.0f), _CMP_LT_OQ);
  r = _mm256_blendv_ps(r, _mm256_setzero_ps(), zero_lanes);
  if ((under & ~_mm256_movemask_ps(zero_lanes)) == 0) return r;
  alignas(32) float vv[8], rr[8];
  _mm256_store_ps(vv, v);
  _mm256_store_ps(rr, r);
  for (int k = 0; k < 8; ++k)
    if (under & (1 << k)) rr[k] = vv[k] < -104.0f ? 0.0f : std::exp(vv[k]);
  return _mm256_load_ps(rr);
}

// gelu(x) = 0.5 x (1 + erf(x / sqrt 2)), or with tanh_form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
struct Gelu8 {
  bool tanh_form;
  __m256 operator()(__m256 x) const {
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    __m256 t;
    if (tanh_form) {
      __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
      t = tanh8(_mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f), _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x)));
    } else {
      t = erf8(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752440f)));
    }
    return _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_add_ps(one, t));
  }
};
// sigmoid(x) = 1 / (1 + e^-x)
inline __m256 sigmoid8(__m256 v) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), v))));
}
// silu(x) = x sigmoid(x)
inline __m256 silu8(__m256 v) { return _mm256_mul_ps(v, sigmoid8(v)); }

// g gelu'(x) in 8 lanes (scalar_math.h's gelu_backward_erf / gelu_backward_tanh), each product and
// sum rounded in the order of the composite formula in ops/pointwise.cpp, so that the fused op
// gives the composite's f32 results bit for bit.
inline __m256 gelu_backward8(__m256 g, __m256 x, bool tanh_form) {
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  const __m256 x2 = _mm256_mul_ps(x, x);
  __m256 d;
  if (tanh_form) {
    // t = tanh((x + x x x c) k); d = (1 + t) / 2 + x / 2 (1 - t t) ((x x (3 c) + 1) k)
    const __m256 k = _mm256_set1_ps(float(0.7978845608028654)), c = _mm256_set1_ps(float(0.044715));
    const __m256 t = tanh8(_mm256_mul_ps(_mm256_add_ps(x, _mm256_mul_ps(_mm256_mul_ps(x2, x), c)), k));
    const __m256 u1 = _mm256_mul_ps(_mm256_add_ps(_mm256_mul_ps(x2, _mm256_set1_ps(float(3.0 * 0.044715))), one), k);
    const __m256 q = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(x, half), _mm256_sub_ps(one, _mm256_mul_ps(t, t))), u1);
    d = _mm256_add_ps(_mm256_mul_ps(_mm256_add_ps(one, t), half), q);
  } else {
    // (erf(x / sqrt 2) + 1) / 2 + x (exp(-x x / 2) / sqrt(2 pi))
    const __m256 cdf =
        _mm256_mul_ps(_mm256_add_ps(erf8(_mm256_mul_ps(x, _mm256_set1_ps(float(0.7071067811865476)))), one), half);
    const __m256 pdf =
        _mm256_mul_ps(exp8(_mm256_mul_ps(x2, _mm256_set1_ps(-0.5f))), _mm256_set1_ps(float(0.3989422804014327)));
    d = _mm256_add_ps(cdf, _mm256_mul_ps(x, pdf));
  }
  return _mm256_mul_ps(g, d);
}

// True when the kernel can take the vector path: f32, both contiguous.
inline bool vec_f32_ok(const Tensor& in, const Tensor& out) {
  return in.dtype() == DType::F32 && out.dtype() == DType::F32 && in.is_contiguous() && out.is_contiguous() &&
         in.sizes() == out.sizes();
}
inline bool vec_bf16_ok(const Tensor& in, const Tensor& out) {
  return in.dtype() == DType::BF16 && out.dtype() == DType::BF16 && in.is_contiguous() && out.is_contiguous() &&
         in.sizes() == out.sizes();
}

// 8 bf16 (bit patterns) -> 8 f32: exact, the bits shifted into the high half.
inline __m256 widen_bf16x8(__m128i b) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16)); }
inline __m256 load_bf16x8(const uint16_t* p) {
  return widen_bf16x8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// 8 f32 -> 8 bf16 rounded to nearest even, NaN kept quiet: float_to_bf16_bits (core/half.h) in 8 lanes.
inline __m128i round_bf16x8(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i one = _mm256_set1_epi32(1);
  __m256i r =
      _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
  r = _mm256_srli_epi32(r, 16);
  const __m256i is_nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  r = _mm256_blendv_epi8(r, quiet, is_nan);
  // 8 x u32 (each < 2^16) -> 8 x u16: pack within the 128-bit halves, then bring the halves together
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
  return _mm256_castsi256_si128(packed);
}
inline void store_bf16x8(uint16_t* p, __m256 v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), round_bf16x8(v)); }

// 8 elements of f32 (float) or bf16 (uint16_t bit patterns) as 8 f32 lanes, and back (bf16 rounded once)
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) { return load_bf16x8(p); }
inline void store8(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
inline void store8(uint16_t* p, __m256 v) { store_bf16x8(p, v); }

// y[i] = f8(x_0[i..i+8], ...) over n elements of T (float or bf16 bits), split across the pool; the
// tail goes through a padded block, so every element sees the same lanes' function. For bf16 the
// f32 kernel runs between exact widening and one rounding: what the scalar loop computes in
// acc_t<bf16> = float.
template <typename T, typename F8, typename... In> void map_x8(T* y, int64_t n, const F8& f8, const In*... x) {
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
    int64_t i = b;
    for (; i + 8 <= e; i += 8) store8(y + i, f8(load8(x + i)...));
    if (i < e) {
      auto padded = [&](const T* p) {
        std::array<T, 8> t{};
        std::memcpy(t.data(), p + i, size_t(e - i) * sizeof(T));
        return t;
      };
      std::array<T, 8> out;
      store8(out.data(), f8(load8(padded(x).data())...));
      std::memcpy(y + i, out.data(), size_t(e - i) * sizeof(T));
    }
  });
}

}  // namespace tr::cpu
