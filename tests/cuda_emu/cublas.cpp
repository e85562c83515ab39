// The emulated cuBLAS: each GEMM is queued on the handle's stream and computed there by OpenBLAS
// (column-major, as cuBLAS); f16 / bf16 operands widen to f32, are multiplied in f32 and rounded
// once, as CUBLAS_COMPUTE_32F does. beta = 0 overwrites C without reading it.
#include <cublas_v2.h>
#include <cblas.h>
#include <cstdint>
#include <cstring>
#include <vector>
#include "blas_elements.h"
#include "runtime_internal.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  int device = 0;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

namespace {

using cuda_emu::all_on_device;

CBLAS_TRANSPOSE cblas_op(cublasOperation_t t) { return t == CUBLAS_OP_N ? CblasNoTrans : CblasTrans; }

using cuda_emu::elem_size;
using cuda_emu::load_as_float;
using cuda_emu::store_from_float;

// Elements a column-major operand op(X) of rows x cols spans with leading dimension ld.
size_t span(cublasOperation_t t, int rows, int cols, int ld) {
  return t == CUBLAS_OP_N ? cuda_emu::col_major_span(rows, cols, ld) : cuda_emu::col_major_span(cols, rows, ld);
}

template <typename T> cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                  int n, int k, T alpha, const T* A, int lda, long long sa, const T* B,
                                                  int ldb, long long sb, T beta, T* C, int ldc, long long sc,
                                                  int batch) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || ldc < std::max(1, m) || lda < std::max(1, ta == CUBLAS_OP_N ? m : k) ||
      ldb < std::max(1, tb == CUBLAS_OP_N ? k : n))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!all_on_device(h->device, {A, B, C})) return CUBLAS_STATUS_INVALID_VALUE;
  cuda_emu::count(cuda_emu::Counter::Kernel);
  cuda_emu::enqueue(cuda_emu::stream_of(h->stream), [=] {
    for (int b = 0; b < batch; ++b) {
      T* c = C + b * sc;
      if (beta == T(0))  // C is not read
        for (int j = 0; j < n; ++j) std::memset(c + size_t(j) * size_t(ldc), 0, size_t(m) * sizeof(T));
      if (m == 0 || n == 0) continue;
      if constexpr (sizeof(T) == 4)
        cblas_sgemm(CblasColMajor, cblas_op(ta), cblas_op(tb), m, n, k, alpha, A + b * sa, lda, B + b * sb, ldb,
                    beta == T(0) ? T(1) * 0 : beta, c, ldc);
      else
        cblas_dgemm(CblasColMajor, cblas_op(ta), cblas_op(tb), m, n, k, alpha, A + b * sa, lda, B + b * sb, ldb,
                    beta == T(0) ? T(1) * 0 : beta, c, ldc);
    }
    return true;
  });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t gemm_ex(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                       const void* alpha, const void* A, cudaDataType_t at, int lda, long long sa, const void* B,
                       cudaDataType_t bt, int ldb, long long sb, const void* beta, void* C, cudaDataType_t ct, int ldc,
                       long long sc, int batch, cublasComputeType_t compute) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (elem_size(at) == 0 || elem_size(at) == 8 || at != bt || bt != ct) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || ldc < std::max(1, m)) return CUBLAS_STATUS_INVALID_VALUE;
  if (!all_on_device(h->device, {A, B, C})) return CUBLAS_STATUS_INVALID_VALUE;
  cuda_emu::count(cuda_emu::Counter::Kernel);
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  cuda_emu::enqueue(cuda_emu::stream_of(h->stream), [=] {
    const size_t na = span(ta, m, k, lda), nb = span(tb, k, n, ldb);
    std::vector<float> a(na), b(nb), c(size_t(ldc) * size_t(n));
    for (int q = 0; q < batch; ++q) {
      for (size_t i = 0; i < na; ++i) a[i] = load_as_float(A, at, size_t(q * sa) + i);
      for (size_t i = 0; i < nb; ++i) b[i] = load_as_float(B, bt, size_t(q * sb) + i);
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i)
          c[size_t(j) * size_t(ldc) + size_t(i)] =
              be == 0.0f ? 0.0f : load_as_float(C, ct, size_t(q * sc) + size_t(j) * size_t(ldc) + size_t(i));
      if (m && n)
        cblas_sgemm(CblasColMajor, cblas_op(ta), cblas_op(tb), m, n, k, al, a.data(), lda, b.data(), ldb, be, c.data(),
                    ldc);
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i)
          store_from_float(C, ct, size_t(q * sc) + size_t(j) * size_t(ldc) + size_t(i),
                           c[size_t(j) * size_t(ldc) + size_t(i)]);
    }
    return true;
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

const char* cublasGetStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}
const char* cublasGetStatusString(cublasStatus_t s) { return cublasGetStatusName(s); }
cublasStatus_t cublasGetProperty(libraryPropertyType type, int* value) {
  *value = type == MAJOR_VERSION ? 13 : type == MINOR_VERSION ? 1 : 0;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasCreate(cublasHandle_t* h) {
  const int dev = cuda_emu::handle_device();
  if (dev < 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  *h = new cublasContext;
  (*h)->device = dev;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) {
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
  h->stream = s;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) {
  h->math = mode;  // TF32 or not, the emulator multiplies in full f32
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float* alpha, const float* A, int lda, const float* B, int ldb, const float* beta,
                           float* C, int ldc) {
  return gemm_batched<float>(h, ta, tb, m, n, k, *alpha, A, lda, 0, B, ldb, 0, *beta, C, ldc, 0, 1);
}
cublasStatus_t cublasDgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const double* alpha, const double* A, int lda, const double* B, int ldb, const double* beta,
                           double* C, int ldc) {
  return gemm_batched<double>(h, ta, tb, m, n, k, *alpha, A, lda, 0, B, ldb, 0, *beta, C, ldc, 0, 1);
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float* alpha, const float* A, int lda, long long sa,
                                         const float* B, int ldb, long long sb, const float* beta, float* C, int ldc,
                                         long long sc, int batch) {
  return gemm_batched<float>(h, ta, tb, m, n, k, *alpha, A, lda, sa, B, ldb, sb, *beta, C, ldc, sc, batch);
}
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const double* alpha, const double* A, int lda, long long sa,
                                         const double* B, int ldb, long long sb, const double* beta, double* C, int ldc,
                                         long long sc, int batch) {
  return gemm_batched<double>(h, ta, tb, m, n, k, *alpha, A, lda, sa, B, ldb, sb, *beta, C, ldc, sc, batch);
}
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void* alpha, const void* A, cudaDataType_t at, int lda, const void* B,
                            cudaDataType_t bt, int ldb, const void* beta, void* C, cudaDataType_t ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
  return gemm_ex(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C, ct, ldc, 0, 1, compute);
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void* alpha, const void* A, cudaDataType_t at, int lda,
                                          long long sa, const void* B, cudaDataType_t bt, int ldb, long long sb,
                                          const void* beta, void* C, cudaDataType_t ct, int ldc, long long sc,
                                          int batch, cublasComputeType_t compute, cublasGemmAlgo_t) {
  return gemm_ex(h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct, ldc, sc, batch, compute);
}
