// bf16 GEMM on CPUs with AVX512_BF16 (vdpbf16ps: two bf16 products summed into an f32 lane per
// instruction, twice the multiply rate of f32 FMA). Used by mm/bmm for bf16 operands, i.e. the
// matmuls of bf16 autocast; elsewhere the operands are widened to f32 for sgemm.
#pragma once
#include "core/tensor.h"

namespace tr::cpu {

// True when this CPU executes vdpbf16ps (checked once).
bool gemm_bf16_available();

// out[M, N] = a[M, K] b[K, N]: a and b bf16 with any strides, f32 accumulation, out (contiguous,
// bf16 or f32) written rounded to nearest even. Like vdpbf16ps, subnormal inputs count as zero.
// Requires gemm_bf16_available().
void gemm_bf16(const Tensor& a, const Tensor& b, const Tensor& out);

}  // namespace tr::cpu
