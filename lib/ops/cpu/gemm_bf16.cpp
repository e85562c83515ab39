// bf16 GEMM with vdpbf16ps. B is packed into panels of 32 columns, each k-pair of a column as one
// 32-bit lane ([k][j] and [k+1][j] side by side, what vdpbf16ps multiplies pairwise); A is packed
// as k-pairs per row. An 8 x 32 tile keeps 16 zmm accumulators; each k-pair step loads two B
// vectors and broadcasts one A pair per row. Tiles are spread over the OpenMP pool.
#include "ops/cpu/gemm_bf16.h"
#include <immintrin.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "ops/cpu/cpu_isa.h"
#include "ops/cpu/env_choice.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/onednn.h"

namespace tr::cpu {

namespace {

constexpr int64_t kMR = 8, kNR = 32;

// element (i, j) of a 2-D bf16 tensor's bits
inline uint16_t at(const uint16_t* p, int64_t s0, int64_t s1, int64_t i, int64_t j) { return p[i * s0 + j * s1]; }

__attribute__((target("avx512f,avx512bw,avx512bf16"))) void tile(const uint32_t* ap, const uint32_t* bp, int64_t kp,
                                                                 float* c) {
  // ap: kMR rows x kp pairs (row-major); bp: kp x (kNR / 2 * 2) lanes = kp x 32 uint32; c: kMR x kNR
  __m512 acc[kMR][2];
  for (int r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kp; ++k) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + k * kNR);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + k * kNR + 16);
    for (int r = 0; r < kMR; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(int(ap[r * kp + k]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, b1);
    }
  }
  for (int r = 0; r < kMR; ++r) {
    _mm512_storeu_ps(c + r * kNR, acc[r][0]);
    _mm512_storeu_ps(c + r * kNR + 16, acc[r][1]);
  }
}

// n (<= 32) floats -> bf16, rounded to nearest even (vcvtneps2bf16)
__attribute__((target("avx512f,avx512bw,avx512bf16,avx512vl"))) void round_row(const float* c, BFloat16* o, int64_t n) {
  const __mmask16 m0 = __mmask16(n >= 16 ? 0xffff : (1u << n) - 1);
  const __mmask16 m1 = __mmask16(n >= 32 ? 0xffff : n <= 16 ? 0 : (1u << (n - 16)) - 1);
  __m256i lo = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m0, c));
  _mm256_mask_storeu_epi16(o, m0, lo);
  if (m1) {
    __m256i hi = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m1, c + 16));
    _mm256_mask_storeu_epi16(o + 16, m1, hi);
  }
}

}  // namespace

Bf16Gemm bf16_gemm_kernel() {
  static const Bf16Gemm k = [] {
    if (!use_avx512_bf16()) return Bf16Gemm::F32;
    const std::string dflt = onednn_bf16_preferred() ? "onednn" : "f32";
    const std::string v = env_choice("TR_BF16_GEMM", {"onednn", "native", "f32"}, dflt);
    return v == "onednn" ? Bf16Gemm::OneDnn : v == "native" ? Bf16Gemm::Native : Bf16Gemm::F32;
  }();
  return k;
}

const char* bf16_gemm_name(Bf16Gemm k) {
  return k == Bf16Gemm::OneDnn   ? "oneDNN matmul (native bf16)"
         : k == Bf16Gemm::Native ? "vdpbf16ps (trainer's kernel, native bf16)"
                                 : "widened to f32 for the f32 GEMM";
}

void gemm_bf16(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const int64_t kp = (K + 1) / 2;  // k-pairs; an odd K pads with a zero
  const int64_t mt = (M + kMR - 1) / kMR, nt = (N + kNR - 1) / kNR;
  const uint16_t* pa = static_cast<const uint16_t*>(a.raw_data());
  const uint16_t* pb = static_cast<const uint16_t*>(b.raw_data());
  const int64_t as0 = a.stride(0), as1 = a.stride(1), bs0 = b.stride(0), bs1 = b.stride(1);

  // A: mt blocks of kMR rows x kp pairs (rows past M are zero)
  std::vector<uint32_t> A(size_t(mt * kMR * kp), 0u);
  parallel_for(mt * kMR, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < std::min(r1, M); ++i) {
      uint32_t* row = A.data() + i * kp;  // block i / kMR, row i % kMR: the same offset
      for (int64_t k = 0; k < kp; ++k) {
        uint32_t lo = at(pa, as0, as1, i, 2 * k);
        uint32_t hi = 2 * k + 1 < K ? at(pa, as0, as1, i, 2 * k + 1) : 0u;
        row[k] = lo | hi << 16;
      }
    }
  });
  // B: nt panels of kp x kNR lanes (columns past N are zero)
  std::vector<uint32_t> B(size_t(nt * kp * kNR), 0u);
  parallel_for(nt, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      uint32_t* panel = B.data() + p * kp * kNR;
      const int64_t j0 = p * kNR, jn = std::min(kNR, N - j0);
      for (int64_t k = 0; k < kp; ++k)
        for (int64_t j = 0; j < jn; ++j) {
          uint32_t lo = at(pb, bs0, bs1, 2 * k, j0 + j);
          uint32_t hi = 2 * k + 1 < K ? at(pb, bs0, bs1, 2 * k + 1, j0 + j) : 0u;
          panel[k * kNR + j] = lo | hi << 16;
        }
    }
  });

  const bool f32_out = out.dtype() == DType::F32;
  float* of = f32_out ? static_cast<float*>(out.raw_data()) : nullptr;
  BFloat16* ob = f32_out ? nullptr : static_cast<BFloat16*>(out.raw_data());
  // tiles in panel-major order: consecutive tiles of a thread share B's panel
  parallel_for(mt * nt, 1, [&](int64_t t0, int64_t t1) {
    alignas(64) float c[kMR * kNR];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t p = t / mt, m = t % mt;
      tile(A.data() + m * kMR * kp, B.data() + p * kp * kNR, kp, c);
      const int64_t i0 = m * kMR, j0 = p * kNR;
      const int64_t in = std::min(kMR, M - i0), jn = std::min(kNR, N - j0);
      for (int64_t r = 0; r < in; ++r) {
        if (f32_out)
          std::memcpy(of + (i0 + r) * N + j0, c + r * kNR, size_t(jn) * sizeof(float));
        else
          round_row(c + r * kNR, ob + (i0 + r) * N + j0, jn);
      }
    }
  });
}

}  // namespace tr::cpu
