// The emulated cuBLASLt: cublasLtMatmul with the epilogues the project uses, queued on the given
// stream and computed there in f32 by OpenBLAS (column-major, as the library):
//   D = alpha op(A) op(B) + beta C              (beta = 0: C is not read)
//   BIAS:   D[i, j] += bias[i]                  (the vector has D's rows, broadcast over columns)
//   RELU:   D = D > 0 ? D : 0                   (after the bias; NaN becomes 0, as max(x, 0) on the device)
//   GELU:   D = 0.5 D (1 + tanh(sqrt(2/pi) (D + 0.044715 D^3)))   (the tanh form; after the bias)
//   *_AUX:  aux[i, j] = D[i, j] before the GELU (aux has leading dimension EPILOGUE_AUX_LD)
//   BGRADA: bias[i] = sum_k op(A)[i, k]         (D's rows; the product is written as usual)
//   BGRADB: bias[j] = sum_k op(B)[k, j]         (D's columns)
// each value rounded once to its storage type. A, B, C, D share one type (f16, bf16 or f32) and the
// compute type is f32 (CUBLAS_COMPUTE_32F, or _FAST_TF32, which the emulator computes in full f32);
// f64 and the other epilogues are not emulated (NOT_SUPPORTED), nor bias gradients with alpha != 1.
//
// The emulator's model of algorithms and alignment: the heuristic offers one algorithm, found for
// the preferences' minimum alignments of A, B, C and D (256 bytes unless set, as the library's
// defaults); cublasLtMatmul refuses (INVALID_VALUE) a pointer less aligned than its algorithm was
// found for, a workspace smaller than it asked, or operands on another device. The heuristic
// finds none (NOT_SUPPORTED) for a bias vector or aux matrix not aligned to 16 bytes, an aux
// leading dimension that is not a multiple of 8 or is below D's rows (the library's documented
// rule). Where the preference allows it, the algorithm asks for a workspace (up to 1 MiB) and
// overwrites it, as split-K partial sums would, so a workspace that aliases live data shows.
#include <cublasLt.h>
#include <cblas.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
#include "blas_elements.h"
#include "runtime_internal.h"

struct cublasLtContext {
  int device = 0;
};
struct cublasLtMatmulDescEmu {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = -1;  // -1: D's type
  void* aux = nullptr;
  int64_t aux_ld = 0;
};
struct cublasLtMatrixLayoutEmu {
  cudaDataType_t type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};
struct cublasLtMatmulPreferenceEmu {
  uint64_t max_workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D
};

namespace {

using cuda_emu::col_major_span;
using cuda_emu::elem_size;
using cuda_emu::load_as_float;
using cuda_emu::store_from_float;

constexpr uint64_t kAlgoTag = 0x4c54454d55ull;  // "LTEMU": marks an algorithm this heuristic made
constexpr size_t kSplitKWorkspace = size_t(1) << 20;
constexpr uintptr_t kVectorAlignment = 16;

bool has_bias(cublasLtEpilogue_t e) { return (e & CUBLASLT_EPILOGUE_BIAS) != 0; }
bool is_bgrad(cublasLtEpilogue_t e) { return e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB; }
bool is_relu(cublasLtEpilogue_t e) { return (e & CUBLASLT_EPILOGUE_RELU) != 0; }
bool is_gelu(cublasLtEpilogue_t e) { return (e & CUBLASLT_EPILOGUE_GELU) != 0; }
bool has_aux(cublasLtEpilogue_t e) { return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
bool emulated(cublasLtEpilogue_t e) {
  switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT:
    case CUBLASLT_EPILOGUE_RELU:
    case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_RELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU:
    case CUBLASLT_EPILOGUE_GELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU_AUX:
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_BGRADA:
    case CUBLASLT_EPILOGUE_BGRADB: return true;
    default: return false;
  }
}
bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <typename T> cublasStatus_t read_attr(T& dst, const void* buf, size_t size) {
  if (!buf || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&dst, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

// The problem's m x n x k, from op(A) m x k, op(B) k x n and C, D m x n; false if they disagree.
struct Dims {
  int64_t m = 0, n = 0, k = 0;
};
bool dims_of(const cublasLtMatmulDescEmu& d, const cublasLtMatrixLayoutEmu& A, const cublasLtMatrixLayoutEmu& B,
             const cublasLtMatrixLayoutEmu& C, const cublasLtMatrixLayoutEmu& D, Dims& out) {
  const auto rows = [](const cublasLtMatrixLayoutEmu& l, cublasOperation_t t) {
    return int64_t(t == CUBLAS_OP_N ? l.rows : l.cols);
  };
  const auto cols = [](const cublasLtMatrixLayoutEmu& l, cublasOperation_t t) {
    return int64_t(t == CUBLAS_OP_N ? l.cols : l.rows);
  };
  out = {int64_t(D.rows), int64_t(D.cols), cols(A, d.transa)};
  for (const auto* l : {&A, &B, &C, &D})
    if (l->ld < std::max<int64_t>(1, int64_t(l->rows))) return false;
  return rows(A, d.transa) == out.m && rows(B, d.transb) == out.k && cols(B, d.transb) == out.n && C.rows == D.rows &&
         C.cols == D.cols;
}

// Why the heuristic finds no algorithm, or SUCCESS.
cublasStatus_t check_problem(const cublasLtMatmulDescEmu& d, const cublasLtMatrixLayoutEmu& A,
                             const cublasLtMatrixLayoutEmu& B, const cublasLtMatrixLayoutEmu& C,
                             const cublasLtMatrixLayoutEmu& D, Dims& dims) {
  if (!dims_of(d, A, B, C, D, dims)) return CUBLAS_STATUS_INVALID_VALUE;
  if (d.transa == CUBLAS_OP_C || d.transb == CUBLAS_OP_C) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d.compute != CUBLAS_COMPUTE_32F && d.compute != CUBLAS_COMPUTE_32F_FAST_TF32) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d.scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  const cudaDataType_t t = D.type;
  if (elem_size(t) == 0 || elem_size(t) == 8 || A.type != t || B.type != t || C.type != t)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!emulated(d.epilogue)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (has_bias(d.epilogue) || is_bgrad(d.epilogue)) {
    if (!d.bias) return CUBLAS_STATUS_INVALID_VALUE;
    if (d.bias_type != -1 && d.bias_type != int32_t(t)) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!aligned(d.bias, kVectorAlignment)) return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (has_aux(d.epilogue)) {
    if (!d.aux) return CUBLAS_STATUS_INVALID_VALUE;
    if (d.aux_ld % 8 != 0 || d.aux_ld < int64_t(D.rows)) return CUBLAS_STATUS_INVALID_VALUE;
    if (!aligned(d.aux, kVectorAlignment)) return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return CUBLAS_STATUS_SUCCESS;
}

// The one algorithm: the alignments it was found for and the workspace it wants.
cublasLtMatmulHeuristicResult_t algorithm_for(const cublasLtMatmulPreferenceEmu& p) {
  cublasLtMatmulHeuristicResult_t r{};
  r.algo.data[0] = kAlgoTag;
  for (int i = 0; i < 4; ++i) r.algo.data[1 + i] = p.align[i];
  r.workspaceSize = size_t(std::min<uint64_t>(p.max_workspace, kSplitKWorkspace));
  r.algo.data[5] = r.workspaceSize;
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  return r;
}

float gelu_tanh(float x) {
  const float k0 = 0.7978845608028654f, k1 = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(k0 * (x + k1 * x * x * x)));
}

// Reads a column-major operand (rows x cols, ld) as f32.
std::vector<float> widen(const void* p, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld) {
  std::vector<float> v(col_major_span(rows, cols, ld));
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = 0; i < rows; ++i) v[size_t(j * ld + i)] = load_as_float(p, t, size_t(j * ld + i));
  return v;
}

// Everything one call computes, copied at the call (descriptors may be destroyed before it runs).
struct Job {
  cublasLtMatmulDescEmu d;
  cublasLtMatrixLayoutEmu A, B, C, D;
  Dims dims;
  float alpha = 1, beta = 0;
  const void *a = nullptr, *b = nullptr, *c = nullptr;
  void* out = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

void run(const Job& j) {
  const int64_t m = j.dims.m, n = j.dims.n, k = j.dims.k, ldd = j.D.ld;
  const cudaDataType_t t = j.D.type;
  if (j.workspace_bytes) std::memset(j.workspace, 0xa5, j.workspace_bytes);  // the partial sums' scratch
  const std::vector<float> a = widen(j.a, t, int64_t(j.A.rows), int64_t(j.A.cols), j.A.ld);
  const std::vector<float> b = widen(j.b, t, int64_t(j.B.rows), int64_t(j.B.cols), j.B.ld);
  std::vector<float> d(col_major_span(m, n, ldd), 0.0f);
  if (j.beta != 0.0f)
    for (int64_t c = 0; c < n; ++c)
      for (int64_t r = 0; r < m; ++r) d[size_t(c * ldd + r)] = load_as_float(j.c, t, size_t(c * j.C.ld + r));
  const CBLAS_TRANSPOSE ta = j.d.transa == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
  const CBLAS_TRANSPOSE tb = j.d.transb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
  if (m && n) {
    if (k)
      cblas_sgemm(CblasColMajor, ta, tb, int(m), int(n), int(k), j.alpha, a.data(), int(j.A.ld), b.data(), int(j.B.ld),
                  j.beta, d.data(), int(ldd));
    else
      for (float& v : d) v *= j.beta;
  }
  const cublasLtEpilogue_t e = j.d.epilogue;
  const auto at = [&](const std::vector<float>& x, int64_t ld, bool trans, int64_t r, int64_t c) {
    return trans ? x[size_t(r * ld + c)] : x[size_t(c * ld + r)];
  };
  void* vec = const_cast<void*>(j.d.bias);
  if (e == CUBLASLT_EPILOGUE_BGRADA)
    for (int64_t r = 0; r < m; ++r) {
      float s = 0;
      for (int64_t q = 0; q < k; ++q) s += at(a, j.A.ld, j.d.transa != CUBLAS_OP_N, r, q);
      store_from_float(vec, t, size_t(r), s);
    }
  if (e == CUBLASLT_EPILOGUE_BGRADB)
    for (int64_t c = 0; c < n; ++c) {
      float s = 0;
      for (int64_t q = 0; q < k; ++q) s += at(b, j.B.ld, j.d.transb != CUBLAS_OP_N, q, c);
      store_from_float(vec, t, size_t(c), s);
    }
  for (int64_t c = 0; c < n; ++c)
    for (int64_t r = 0; r < m; ++r) {
      float v = d[size_t(c * ldd + r)];
      if (has_bias(e)) v += load_as_float(j.d.bias, t, size_t(r));
      if (has_aux(e)) store_from_float(j.d.aux, t, size_t(c * j.d.aux_ld + r), v);
      if (is_relu(e)) v = v > 0.0f ? v : 0.0f;
      if (is_gelu(e)) v = gelu_tanh(v);
      store_from_float(j.out, t, size_t(c * ldd + r), v);
    }
}

}  // namespace

size_t cublasLtGetVersion(void) { return 130100; }

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  const int dev = cuda_emu::handle_device();
  if (dev < 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = new cublasLtContext;
  (*handle)->device = dev;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
  *desc = new cublasLtMatmulDescEmu;
  (*desc)->compute = compute;
  (*desc)->scale = scale;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  if (!desc) return CUBLAS_STATUS_NOT_INITIALIZED;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return read_attr(desc->transa, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB: return read_attr(desc->transb, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return read_attr(desc->epilogue, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return read_attr(desc->bias, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return read_attr(desc->bias_type, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return read_attr(desc->aux, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return read_attr(desc->aux_ld, buf, size);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;  // not emulated: a caller that needs it fails loudly
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (!layout) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = new cublasLtMatrixLayoutEmu{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = new cublasLtMatmulPreferenceEmu;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t size) {
  if (!pref) return CUBLAS_STATUS_NOT_INITIALIZED;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return read_attr(pref->max_workspace, buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return read_attr(pref->align[0], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return read_attr(pref->align[1], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return read_attr(pref->align[2], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return read_attr(pref->align[3], buf, size);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t pref, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!desc || !Adesc || !Bdesc || !Cdesc || !Ddesc || !pref || requestedAlgoCount < 1 || !heuristicResultsArray ||
      !returnAlgoCount)
    return CUBLAS_STATUS_INVALID_VALUE;
  *returnAlgoCount = 0;
  Dims dims;
  const cublasStatus_t st = check_problem(*desc, *Adesc, *Bdesc, *Cdesc, *Ddesc, dims);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  for (int i = 0; i < 4; ++i)
    if (pref->align[i] < elem_size(Ddesc->type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  heuristicResultsArray[0] = algorithm_for(*pref);
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!desc || !alpha || !beta || !Adesc || !Bdesc || !Cdesc || !Ddesc) return CUBLAS_STATUS_INVALID_VALUE;
  Job j;
  const cublasStatus_t st = check_problem(*desc, *Adesc, *Bdesc, *Cdesc, *Ddesc, j.dims);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  // without an algorithm: the implicit heuristic, for the pointers' own alignment and no workspace
  cublasLtMatmulPreferenceEmu implicit;
  for (uint32_t& a : implicit.align) a = uint32_t(elem_size(Ddesc->type));
  const cublasLtMatmulAlgo_t chosen = algo ? *algo : algorithm_for(implicit).algo;
  if (chosen.data[0] != kAlgoTag) return CUBLAS_STATUS_INVALID_VALUE;
  const void* operands[4] = {A, B, C, D};
  for (int i = 0; i < 4; ++i)
    if (!aligned(operands[i], uintptr_t(chosen.data[1 + i]))) return CUBLAS_STATUS_INVALID_VALUE;
  if (workspaceSizeInBytes < chosen.data[5] || (chosen.data[5] && !workspace)) return CUBLAS_STATUS_INVALID_VALUE;
  j.alpha = *static_cast<const float*>(alpha);
  j.beta = *static_cast<const float*>(beta);
  if (is_bgrad(desc->epilogue) && j.alpha != 1.0f) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!A || !B || !D || (j.beta != 0.0f && !C)) return CUBLAS_STATUS_INVALID_VALUE;
  if (!cuda_emu::all_on_device(handle->device, {A, B, C, D, desc->bias, desc->aux, workspace}))
    return CUBLAS_STATUS_INVALID_VALUE;
  j.d = *desc;
  j.A = *Adesc;
  j.B = *Bdesc;
  j.C = *Cdesc;
  j.D = *Ddesc;
  j.a = A;
  j.b = B;
  j.c = C;
  j.out = D;
  j.workspace = workspace;
  j.workspace_bytes = size_t(chosen.data[5]);
  cuda_emu::count(cuda_emu::Counter::Kernel);
  cuda_emu::enqueue(cuda_emu::stream_of(stream), [j] {
    run(j);
    return true;
  });
  return CUBLAS_STATUS_SUCCESS;
}
