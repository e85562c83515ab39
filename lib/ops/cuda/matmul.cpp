// CUDA launchers of mm, bmm and addmm: f32/f64 through cublas{S,D}gemm, f16/bf16 through cublasGemmEx
// with f32 compute, integers through a plain kernel (int64 accumulation, as the CPU loop); addmm and
// its weight and bias gradients through cuBLASLt's epilogues where it takes them (cublas_lt.h).
// Row-major C = A B is computed as the column-major product C^T = B^T A^T.
#include "ops/backends.h"
#include "ops/cuda/cublas_lt.h"
#include "ops/cuda/gemm_operand.h"
#include "ops/cuda/library_check.h"
#include "ops/cuda/tensor_args.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::cuda {

namespace {

cublasHandle_t cublas_handle(int device) {
  return per_device_handle<cublasHandle_t>(device, [] {
    cublasHandle_t h = nullptr;
    TR_CUBLAS_CHECK(cublas_library().cublasCreate(&h));
    return h;
  });
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
  const CublasLibrary& blas = cublas_library();
  // TF32 for f32 products only when allowed (torch.backends.cuda.matmul.allow_tf32)
  TR_CUBLAS_CHECK(blas.cublasSetMathMode(
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
      TR_CUBLAS_CHECK(
          blas.cublasSgemm(h, B.op, A.op, m, n, k, &one, pa, lda, pb, ldb, &zero, static_cast<float*>(C), ldc));
    else
      TR_CUBLAS_CHECK(blas.cublasSgemmStridedBatched(h, B.op, A.op, m, n, k, &one, pa, lda, sa, pb, ldb, sb, &zero,
                                                     static_cast<float*>(C), ldc, sc, nb));
  } else if (t == DType::F64) {
    const double one = 1.0, zero = 0.0;
    const double *pa = static_cast<const double*>(B.p), *pb = static_cast<const double*>(A.p);
    if (nb == 1)
      TR_CUBLAS_CHECK(
          blas.cublasDgemm(h, B.op, A.op, m, n, k, &one, pa, lda, pb, ldb, &zero, static_cast<double*>(C), ldc));
    else
      TR_CUBLAS_CHECK(blas.cublasDgemmStridedBatched(h, B.op, A.op, m, n, k, &one, pa, lda, sa, pb, ldb, sb, &zero,
                                                     static_cast<double*>(C), ldc, sc, nb));
  } else {
    // f16 / bf16 storage, f32 accumulation: the CPU computes in f32 and rounds once too.
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType_t ct = cuda_type(t);
    if (nb == 1)
      TR_CUBLAS_CHECK(blas.cublasGemmEx(h, B.op, A.op, m, n, k, &one, B.p, ct, lda, A.p, ct, ldb, &zero, C, ct, ldc,
                                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
      TR_CUBLAS_CHECK(blas.cublasGemmStridedBatchedEx(h, B.op, A.op, m, n, k, &one, B.p, ct, lda, sa, A.p, ct, ldb, sb,
                                                      &zero, C, ct, ldc, sc, nb, CUBLAS_COMPUTE_32F,
                                                      CUBLAS_GEMM_DEFAULT));
  }
}

void mm_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) { gemm(in[0], in[1], out[0], 1); }
void bmm_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  gemm(in[0], in[1], out[0], in[0].size(0));
}
// addmm and addmm_relu: one cuBLASLt GEMM with the bias (and the relu) in its epilogue, the sum in
// f32 rounded once; where cuBLASLt does not take the case (cublas_lt.h), cuBLAS's product and then
// the bias added (and the relu applied) in place by the pointwise kernels, each value rounded as
// the composite add (and relu) rounds it.
void addmm_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out, bool relu) {
  if (lt_gemm(in[1], in[2], out[0], relu ? LtEpilogue::ReluBias : LtEpilogue::Bias, in[0])) return;
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
// addmm_backward_weight_bias: gw = g^T a with gb = the column sums of g (the row sums of g^T) in the
// GEMM's epilogue; else cuBLAS's product and sum's kernel writing gb.
void addmm_backward_weight_bias_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const Tensor gt = in[0].t();
  if (lt_gemm(gt, in[1], out[0], LtEpilogue::BgradRows, out[1])) return;
  gemm(gt, in[1], out[0], 1);
  std::vector<Tensor> gb{out[1]};
  def_op("sum").kernels[int(DeviceType::CUDA)]({in[0]}, gb, Attrs{{"dims", std::vector<int64_t>{0}}});
}
TR_REGISTER_KERNEL(mm, CUDA, mm_cuda);
TR_REGISTER_KERNEL(addmm, CUDA, addmm_plain_cuda);
TR_REGISTER_KERNEL(addmm_relu, CUDA, addmm_relu_cuda);
TR_REGISTER_KERNEL(addmm_backward_weight_bias, CUDA, addmm_backward_weight_bias_cuda);
TR_REGISTER_KERNEL(bmm, CUDA, bmm_cuda);

}  // namespace

}  // namespace tr::cuda
