// cuBLASLt's GEMMs with an epilogue, in row-major terms: out [M, N] = a [M, K] b [K, N], then
//   Bias:      out[i, j] += vec[j]
//   ReluBias:  out[i, j] = max(out[i, j] + vec[j], 0)     (max as the device's: a NaN becomes 0)
//   BgradRows: vec[i] = sum_k a[i, k]                     (a linear layer's bias gradient when a = g^T)
// all in one kernel, f32 accumulation and one rounding of each value to its storage type.
#pragma once
#include "core/tensor.h"

namespace tr::cuda {

enum class LtEpilogue { Bias, ReluBias, BgradRows };

// Runs the product and its epilogue as one cublasLtMatmul on the default stream where cuBLASLt
// takes the case, and returns true. Returns false, having launched nothing, where it does not:
// f64 (cuBLAS runs it), a size-1 dim, an operand that is a strided slice or not of out's dtype,
// a vector not aligned to 16 bytes, or no algorithm from the heuristic; the caller then runs the
// cuBLAS GEMM and the epilogue's own kernels. out and vec are contiguous, of a's dtype.
bool lt_gemm(const Tensor& a, const Tensor& b, const Tensor& out, LtEpilogue e, const Tensor& vec);

}  // namespace tr::cuda
