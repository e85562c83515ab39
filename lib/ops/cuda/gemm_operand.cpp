// Row-major matrices as column-major BLAS operands (gemm_operand.h).
#include "ops/cuda/gemm_operand.h"
#include <algorithm>
#include <climits>

namespace tr::cuda {

GemmOperand gemm_operand(const Tensor& x) {
  const int64_t nd = x.dim(), r = x.size(nd - 2), c = x.size(nd - 1);
  const int64_t s0 = x.stride(nd - 2), s1 = x.stride(nd - 1);
  GemmOperand g;
  g.batch_stride = nd == 3 ? x.stride(0) : 0;
  if (s1 == 1 && (s0 >= std::max<int64_t>(c, 1) || r == 1)) {
    g.p = x.raw_data();
    g.op = CUBLAS_OP_N;
    g.ld = std::max<int64_t>(s0, std::max<int64_t>(c, 1));
  } else if (s0 == 1 && (s1 >= std::max<int64_t>(r, 1) || c == 1)) {
    g.p = x.raw_data();
    g.op = CUBLAS_OP_T;
    g.ld = std::max<int64_t>(s1, std::max<int64_t>(r, 1));
  } else {
    g.keep = x.contiguous();
    g.p = g.keep.raw_data();
    g.op = CUBLAS_OP_N;
    g.ld = std::max<int64_t>(c, 1);
    g.batch_stride = nd == 3 ? r * c : 0;
  }
  return g;
}

int as_int(int64_t v, const char* what) {
  TR_CHECK(v >= 0 && v <= INT_MAX, "mm/bmm on CUDA: ", what, " = ", v, " exceeds the 32-bit range of cuBLAS");
  return int(v);
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F32: return CUDA_R_32F;
    case DType::F64: return CUDA_R_64F;
    default: throw_dtype_unsupported("mm (cuBLAS)", t);
  }
}

}  // namespace tr::cuda
