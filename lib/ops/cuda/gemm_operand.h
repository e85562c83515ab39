// Row-major matrices as the column-major operands of cuBLAS and cuBLASLt. Row-major C = A B is
// computed as the column-major product C^T = B^T A^T, so each matrix is handed over as the
// operand that yields its transpose.
#pragma once
#include <cublas_v2.h>
#include "core/tensor.h"

namespace tr::cuda {

// The last two dims of a row-major matrix X[r, c] (batched or not) as the column-major operand
// that yields X^T: unit column stride -> X^T stored with ld = row stride (op N); unit row stride
// -> X stored with ld = column stride (op T); otherwise a contiguous copy.
struct GemmOperand {
  const void* p = nullptr;
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 0;
  int64_t batch_stride = 0;
  Tensor keep;  // the contiguous copy, when one was needed
};
GemmOperand gemm_operand(const Tensor& x);

// v as the int of a cuBLAS argument, or an error naming `what`.
int as_int(int64_t v, const char* what);

// The library's name of a floating dtype.
cudaDataType_t cuda_type(DType t);

}  // namespace tr::cuda
