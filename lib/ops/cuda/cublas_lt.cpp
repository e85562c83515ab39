// lt_gemm (cublas_lt.h): one cublasLtMatmul with an epilogue. Row-major out = a b is the
// column-major D = op(A) op(B) with A = b, B = a (gemm_operand.h): D is N x M, its rows are out's
// columns, so out's per-column bias is CUBLASLT_EPILOGUE_BIAS (a vector of D's rows) and the sums
// of a's rows, D's columns, are CUBLASLT_EPILOGUE_BGRADB (the reduction over k of op(B) = a^T).
#include "ops/cuda/cublas_lt.h"
#include <cublasLt.h>
#include "ops/backends.h"
#include "ops/cuda/gemm_operand.h"
#include "ops/cuda/library_check.h"
#include "ops/cuda/tensor_args.h"

namespace tr::cuda {

namespace {

// The most workspace an algorithm may ask (what torch and TransformerEngine give cuBLASLt on
// Hopper); a call takes what its algorithm asks, from the caching allocator.
constexpr uint64_t kMaxWorkspace = uint64_t(32) << 20;

cublasLtHandle_t lt_handle(int device) {
  return per_device_handle<cublasLtHandle_t>(device, [] {
    cublasLtHandle_t h = nullptr;
    TR_CUBLAS_CHECK(cublas_library().cublasLtCreate(&h));
    return h;
  });
}

// Owners of the call's descriptors.
struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  ~MatmulDesc() {
    if (d) cublas_library().cublasLtMatmulDescDestroy(d);
  }
  template <typename T> void set(cublasLtMatmulDescAttributes_t attr, const T& v) {
    TR_CUBLAS_CHECK(cublas_library().cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
  }
};
struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  Layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld) {
    TR_CUBLAS_CHECK(cublas_library().cublasLtMatrixLayoutCreate(&l, t, uint64_t(rows), uint64_t(cols), ld));
  }
  ~Layout() { cublas_library().cublasLtMatrixLayoutDestroy(l); }
};
struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  Preference() { TR_CUBLAS_CHECK(cublas_library().cublasLtMatmulPreferenceCreate(&p)); }
  ~Preference() { cublas_library().cublasLtMatmulPreferenceDestroy(p); }
  template <typename T> void set(cublasLtMatmulPreferenceAttributes_t attr, const T& v) {
    TR_CUBLAS_CHECK(cublas_library().cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof(v)));
  }
};

// The largest power of two up to 256 that divides p's address: what the heuristic may assume of
// an operand (its default is 256, which a view into a block need not have).
uint32_t alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 1;
  while (al < 256 && a % (2 * al) == 0) al *= 2;
  return al;
}

// An operand as cuBLASLt's layout describes it: the matrix stored (before op), `rows` x `cols`.
// Packed: ld equals the stored rows (no slice of a wider matrix: torch leaves 16-bit operands with
// ld far above their rows to cuBLAS, which cuBLASLt mishandled).
bool packed(const GemmOperand& g, int64_t op_rows, int64_t op_cols, int64_t& rows, int64_t& cols) {
  rows = g.op == CUBLAS_OP_N ? op_rows : op_cols;
  cols = g.op == CUBLAS_OP_N ? op_cols : op_rows;
  return g.ld == rows;
}

}  // namespace

bool lt_gemm(const Tensor& a, const Tensor& b, const Tensor& out, LtEpilogue e, const Tensor& vec) {
  const DType t = out.dtype();
  if (t != DType::F32 && t != DType::F16 && t != DType::BF16) return false;
  if (a.dtype() != t || b.dtype() != t || vec.dtype() != t || !out.is_contiguous() || !vec.is_contiguous())
    return false;
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  // torch's note: cublasLtMatmulAlgoGetHeuristic answered INVALID_VALUE when a factor had a single
  // row or column; such products are cheap on cuBLAS anyway
  if (M <= 1 || N <= 1 || K <= 1) return false;
  // the bias (gradient) vector is read in 16-byte vectors: misaligned ones failed on A100 / H100
  if (reinterpret_cast<uintptr_t>(vec.raw_data()) % 16 != 0) return false;
  const GemmOperand A = gemm_operand(b), B = gemm_operand(a);
  const int m = as_int(N, "N"), n = as_int(M, "M"), k = as_int(K, "K");
  int64_t a_rows, a_cols, b_rows, b_cols;
  if (!packed(A, m, k, a_rows, a_cols) || !packed(B, k, n, b_rows, b_cols)) return false;

  const cudaDataType_t ct = cuda_type(t);
  const bool tf32 = t == DType::F32 && backends::matmul().allow_tf32;
  MatmulDesc desc;
  TR_CUBLAS_CHECK(cublas_library().cublasLtMatmulDescCreate(
      &desc.d, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  desc.set(CUBLASLT_MATMUL_DESC_TRANSA, A.op);
  desc.set(CUBLASLT_MATMUL_DESC_TRANSB, B.op);
  const cublasLtEpilogue_t epilogue = e == LtEpilogue::Bias       ? CUBLASLT_EPILOGUE_BIAS
                                      : e == LtEpilogue::ReluBias ? CUBLASLT_EPILOGUE_RELU_BIAS
                                                                  : CUBLASLT_EPILOGUE_BGRADB;
  desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, vec.raw_data());
  const Layout la(ct, a_rows, a_cols, A.ld), lb(ct, b_rows, b_cols, B.ld), ld(ct, m, n, m);

  Preference pref;
  pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kMaxWorkspace);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment_of(A.p));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment_of(B.p));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment_of(out.raw_data()));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment_of(out.raw_data()));
  DeviceGuard g(out);
  cublasLtHandle_t h = lt_handle(out.device().index);
  cublasLtMatmulHeuristicResult_t algo{};
  int found = 0;
  if (cublas_library().cublasLtMatmulAlgoGetHeuristic(h, desc.d, la.l, lb.l, ld.l, ld.l, pref.p, 1, &algo, &found) !=
          CUBLAS_STATUS_SUCCESS ||
      found == 0)
    return false;

  const Tensor ws = algo.workspaceSize ? workspace(algo.workspaceSize, out.device()) : Tensor();
  const float one = 1.0f, zero = 0.0f;
  // beta = 0: C is not read (it is out, given for its layout)
  TR_CUBLAS_CHECK(cublas_library().cublasLtMatmul(h, desc.d, &one, A.p, la.l, B.p, lb.l, &zero, out.raw_data(), ld.l,
                                                  out.raw_data(), ld.l, &algo.algo,
                                                  ws.defined() ? ws.raw_data() : nullptr, algo.workspaceSize, nullptr));
  return true;
}

}  // namespace tr::cuda
