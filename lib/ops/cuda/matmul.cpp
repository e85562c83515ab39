// CUDA launchers of mm, bmm and addmm: f32/f64 through cublas{S,D}gemm, f16/bf16 through cublasGemmEx
// with f32 compute, integers through a plain kernel (int64 accumulation, as the CPU loop).
// Row-major C = A B is computed as the column-major product C^T = B^T A^T.
#include <climits>
#include "ops/backends.h"
#include "ops/cuda/library_check.h"
#include "ops/cuda/tensor_args.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::cuda {

namespace {

cublasHandle_t cublas_handle(int device) {
  return per_device_handle<cublasHandle_t>(device, [] {
    cublasHandle_t h = nullptr;
    TR_CUBLAS_CHECK(cublasCreate(&h));
    return h;
  });
}

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

// out[b] = a[b] @ bm[b] for b < batch; a [.., M, K], bm [.., K, N], out contiguous [.., M, N].
void gemm(const Tensor& a, const Tensor& bm, const Tensor& out, int64_t batch) {
  const int64_t nd = a.dim();
  const int64_t M = a.size(nd - 2), K = a.size(nd - 1), N = bm.size(nd - 1);
  if (M == 0 || N == 0 || batch == 0) return;
  DeviceGuard g(out);
  if (K == 0) {
    out.detach().zero_();
    return;
  }
  const DType t = out.dtype();
  if (!is_floating(t)) {
    IntGemmArgs args;
    args.batch = batch;
    args.M = M;
    args.N = N;
    args.K = K;
    args.a_strides[0] = nd == 3 ? a.stride(0) : 0;
    args.a_strides[1] = a.stride(nd - 2);
    args.a_strides[2] = a.stride(nd - 1);
    args.b_strides[0] = nd == 3 ? bm.stride(0) : 0;
    args.b_strides[1] = bm.stride(nd - 2);
    args.b_strides[2] = bm.stride(nd - 1);
    args.a = a.raw_data();
    args.b = bm.raw_data();
    args.out = out.raw_data();
    launch_int_gemm(t, args);
    return;
  }
  GemmOperand A = gemm_operand(a), B = gemm_operand(bm);
  cublasHandle_t h = cublas_handle(out.device().index);
  // TF32 for f32 products only when allowed (torch.backends.cuda.matmul.allow_tf32)
  TR_CUBLAS_CHECK(cublasSetMathMode(
      h, t == DType::F32 && backends::matmul().allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  const int m = as_int(N, "N"), n = as_int(M, "M"), k = as_int(K, "K");
  const int lda = as_int(B.ld, "ld"), ldb = as_int(A.ld, "ld"), ldc = m;
  const long long sa = B.batch_stride, sb = A.batch_stride, sc = (long long)(M * N);
  const int nb = as_int(batch, "batch");
  void* C = out.raw_data();
  if (t == DType::F32) {
    const float one = 1.0f, zero = 0.0f;
    const float *pa = static_cast<const float*>(B.p), *pb = static_cast<const float*>(A.p);
    if (nb == 1)
      TR_CUBLAS_CHECK(cublasSgemm(h, B.op, A.op, m, n, k, &one, pa, lda, pb, ldb, &zero, static_cast<float*>(C), ldc));
    else
      TR_CUBLAS_CHECK(cublasSgemmStridedBatched(h, B.op, A.op, m, n, k, &one, pa, lda, sa, pb, ldb, sb, &zero,
                                                static_cast<float*>(C), ldc, sc, nb));
  } else if (t == DType::F64) {
    const double one = 1.0, zero = 0.0;
    const double *pa = static_cast<const double*>(B.p), *pb = static_cast<const double*>(A.p);
    if (nb == 1)
      TR_CUBLAS_CHECK(cublasDgemm(h, B.op, A.op, m, n, k, &one, pa, lda, pb, ldb, &zero, static_cast<double*>(C), ldc));
    else
      TR_CUBLAS_CHECK(cublasDgemmStridedBatched(h, B.op, A.op, m, n, k, &one, pa, lda, sa, pb, ldb, sb, &zero,
                                                static_cast<double*>(C), ldc, sc, nb));
  } else {
    // f16 / bf16 storage, f32 accumulation: the CPU computes in f32 and rounds once too.
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType_t ct = cuda_type(t);
    if (nb == 1)
      TR_CUBLAS_CHECK(cublasGemmEx(h, B.op, A.op, m, n, k, &one, B.p, ct, lda, A.p, ct, ldb, &zero, C, ct, ldc,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
      TR_CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, B.op, A.op, m, n, k, &one, B.p, ct, lda, sa, A.p, ct, ldb, sb,
                                                 &zero, C, ct, ldc, sc, nb, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

void mm_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  gemm(in[0], in[1], out[0], 1);
}
void bmm_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  gemm(in[0], in[1], out[0], in[0].size(0));
}
// addmm and addmm_relu: cuBLAS's product, then the bias added (and the relu applied) in place by
// the pointwise kernels, each value rounded as the composite add (and relu) rounds it
void addmm_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out, bool relu) {
  gemm(in[1], in[2], out[0], 1);
  Tensor o = out[0].detach();
  o.add_(in[0].detach());
  if (relu) dispatch_inplace("relu", o, {});
}
void addmm_plain_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  addmm_cuda(in, out, false);
}
void addmm_relu_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  addmm_cuda(in, out, true);
}
TR_REGISTER_KERNEL(mm, CUDA, mm_cuda);
TR_REGISTER_KERNEL(addmm, CUDA, addmm_plain_cuda);
TR_REGISTER_KERNEL(addmm_relu, CUDA, addmm_relu_cuda);
TR_REGISTER_KERNEL(bmm, CUDA, bmm_cuda);

}  // namespace

}  // namespace tr::cuda
