// bf16 GEMM on CPUs with AVX512_BF16 (vdpbf16ps: two bf16 products summed into an f32 lane per
// instruction). Whether it beats widening the operands to f32 for sgemm depends on the core, see
// bf16_gemm_kernel().
#pragma once
#include "core/tensor.h"

namespace tr::cpu {

// The kernel mm/bmm use for bf16 operands (the matmuls of bf16 autocast), fixed per machine so
// that a run's numbers do not depend on timing:
//   onednn: oneDNN's matmul primitive (ops/cpu/onednn_matmul.h), torch's bf16 path.
//   native: gemm_bf16 below.
//   f32:    the operands widened to f32, the f32 GEMM, the result rounded.
// Default: onednn on AMD CPUs with AVX512_BF16 (on a Zen 5 2.0x its own f32 rate and 3x gemm_bf16
// over gpt_char's products), f32 elsewhere. Measured on Intel Emerald Rapids
// (family 6 model 207): vdpbf16ps zmm issues 0.5 per cycle against vfmadd231ps zmm's 2, i.e.
// half the f32 FMA rate (89 vs 181 GFLOP/s on one core), and gemm_bf16 reached 75 GFLOP/s per
// thread at 1024^3 against sgemm's 161. AMD's Zen 4 runs 512-bit FMAs at half rate and
// vdpbf16ps at full rate, the other way round. TR_BF16_GEMM=onednn|native|f32 overrides.
enum class Bf16Gemm { OneDnn, Native, F32 };
Bf16Gemm bf16_gemm_kernel();
const char* bf16_gemm_name(Bf16Gemm k);

// out[M, N] = a[M, K] b[K, N]: a and b bf16 with any strides, f32 accumulation, out (contiguous,
// bf16 or f32) written rounded to nearest even. Like vdpbf16ps, subnormal inputs count as zero.
// Requires use_avx512_bf16() (ops/cpu/cpu_isa.h).
void gemm_bf16(const Tensor& a, const Tensor& b, const Tensor& out);

}  // namespace tr::cpu
