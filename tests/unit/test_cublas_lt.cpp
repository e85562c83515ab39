// cuBLASLt's epilogues as the library defines them, called directly on device tensors: the CUDA
// emulator's (tests/cuda_emu/cublas_lt.cpp) in the emulation build, the real library on a GPU,
// both against the same row-major formulas. With transa = T and transb = N, row-major tensors
// tA [m, k], tB [n, k] and tD [n, m] are the column-major operands A (k x m, ld k), B (k x n, ld k)
// and D (m x n, ld m), and D = op(A) op(B) reads tD = tB tA^T; then
//   BIAS:   tD += bias (bias [m], D's rows, broadcast over tD's rows)
//   BGRADA: bias = the sums over k of op(A) = tA.sum(1) [m]
//   BGRADB: bias = the sums over k of op(B) = tB.sum(1) [n]
//   GELU_AUX_BIAS: aux = tB tA^T + bias (ld m), tD = gelu_tanh(aux)
// Compiled only in builds with the CUDA backend or its emulation (tests/CMakeLists.txt).
#include <catch2/catch.hpp>
#include <cublasLt.h>
#include <dlfcn.h>
#include "core/cuda/device_guard.h"
#include "ops/cuda/library_check.h"
#include "ops/ops.h"
#include "unit/require_gpu.h"

namespace test_cublas_lt {

using namespace tr;

namespace {

Device gpu() { return Device(DeviceType::CUDA, 0); }

constexpr int64_t kM = 16, kN = 12, kK = 8;

struct LtCall {
  cublasLtEpilogue_t epilogue;
  Tensor tA, tB, tD, vec, aux;  // on the device, f32
};

// Runs D = op(A) op(B) with the epilogue; false (with a warning) if the library offers no algorithm.
bool run(cublasLtHandle_t h, LtCall& c) {
  const tr::cuda::CublasLibrary& lib = tr::cuda::cublas_library();
  cublasLtMatmulDesc_t desc = nullptr;
  TR_CUBLAS_CHECK(lib.cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  TR_CUBLAS_CHECK(lib.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  TR_CUBLAS_CHECK(lib.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  TR_CUBLAS_CHECK(
      lib.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &c.epilogue, sizeof(c.epilogue)));
  void* vec = c.vec.raw_data();
  TR_CUBLAS_CHECK(lib.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vec, sizeof(vec)));
  if (c.aux.defined()) {
    void* aux = c.aux.raw_data();
    const int64_t ld = kM;
    TR_CUBLAS_CHECK(
        lib.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    TR_CUBLAS_CHECK(lib.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
  }
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  TR_CUBLAS_CHECK(lib.cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, kK, kM, kK));
  TR_CUBLAS_CHECK(lib.cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, kK, kN, kK));
  TR_CUBLAS_CHECK(lib.cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, kM, kN, kM));
  cublasLtMatmulPreference_t pref = nullptr;
  TR_CUBLAS_CHECK(lib.cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t no_workspace = 0;
  TR_CUBLAS_CHECK(lib.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                           &no_workspace, sizeof(no_workspace)));
  cublasLtMatmulHeuristicResult_t algo{};
  int found = 0;
  const cublasStatus_t st = lib.cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, ld, ld, pref, 1, &algo, &found);
  const bool ok = st == CUBLAS_STATUS_SUCCESS && found > 0;
  if (ok) {
    const float one = 1.0f, zero = 0.0f;
    TR_CUBLAS_CHECK(lib.cublasLtMatmul(h, desc, &one, c.tA.raw_data(), la, c.tB.raw_data(), lb, &zero, c.tD.raw_data(),
                                       ld, c.tD.raw_data(), ld, &algo.algo, nullptr, 0, nullptr));
  } else {
    WARN("cuBLASLt offers no algorithm for epilogue " << int(c.epilogue) << ": " << lib.cublasGetStatusName(st));
  }
  lib.cublasLtMatmulPreferenceDestroy(pref);
  lib.cublasLtMatrixLayoutDestroy(la);
  lib.cublasLtMatrixLayoutDestroy(lb);
  lib.cublasLtMatrixLayoutDestroy(ld);
  lib.cublasLtMatmulDescDestroy(desc);
  return ok;
}

// |got - want| <= tol (1 + |want|) elementwise
void check_near(const char* what, const Tensor& want, const Tensor& got, double tol = 1e-5) {
  INFO(what);
  REQUIRE(got.sizes() == want.sizes());
  const Tensor w = want.to(DType::F64);
  const double worst = max(abs(got.to(kCPU).to(DType::F64) - w) / (abs(w) + 1.0)).item();
  INFO("largest |got - want| / (1 + |want|): " << worst << " (tolerance " << tol << ")");
  CHECK(worst <= tol);
}

Tensor gelu_tanh(const Tensor& x) { return gelu(x, "tanh"); }

}  // namespace

// No device needed: the product's build opens the toolkit's libraries here (ops/cuda/cublas_library.h).
TEST_CASE("cuBLAS and cuBLASLt: opened on first use, every function found, the headers' version", "[cublas]") {
  const cuda::CublasLibrary& lib = cuda::cublas_library();
#define TR_CUBLAS_FN(library, name) CHECK(lib.name != nullptr);
#include "ops/cuda/cublas_functions.def"
#undef TR_CUBLAS_FN
  int major = -1;
  REQUIRE(lib.cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS);
#ifdef CUBLAS_VER_MAJOR
  CHECK(major == CUBLAS_VER_MAJOR);
  const std::string lt = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* loaded = ::dlopen(lt.c_str(), RTLD_NOW | RTLD_NOLOAD);
  CHECK(loaded != nullptr);  // the library the loader opened, not a second copy
  if (loaded) ::dlclose(loaded);
#endif
  CHECK(std::string(lib.cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE)) == "CUBLAS_STATUS_INVALID_VALUE");
  CHECK(&cuda::cublas_library() == &lib);
}

TEST_CASE("cuBLASLt: the BIAS, BGRADA, BGRADB and GELU_AUX_BIAS epilogues as the library defines them",
          "[gpu][addmm]") {
  TR_REQUIRE_GPU();
  Generator gen(21);
  const Tensor tA = randn({kM, kK}, DType::F32, &gen), tB = randn({kN, kK}, DType::F32, &gen),
               bias = randn({kM}, DType::F32, &gen);
  const Tensor prod = mm(tB, tA.t());
  cuda::DeviceGuard g(0);
  cublasLtHandle_t h = nullptr;
  TR_CUBLAS_CHECK(cuda::cublas_library().cublasLtCreate(&h));
  const auto call = [&](cublasLtEpilogue_t e, const Tensor& vec, bool aux) {
    LtCall c{e,
             tA.to(gpu()),
             tB.to(gpu()),
             empty({kN, kM}, TensorOptions(DType::F32).device(gpu())),
             vec.to(gpu()),
             aux ? empty({kN, kM}, TensorOptions(DType::F32).device(gpu())) : Tensor()};
    return std::make_pair(run(h, c), c);
  };
  SECTION("BIAS: the vector has D's rows") {
    auto [ok, c] = call(CUBLASLT_EPILOGUE_BIAS, bias, false);
    if (ok) check_near("D", prod + bias, c.tD);
  }
  SECTION("BGRADA: sums over k of op(A), one per row of D") {
    auto [ok, c] = call(CUBLASLT_EPILOGUE_BGRADA, zeros({kM}), false);
    if (ok) {
      check_near("D", prod, c.tD);
      check_near("bias gradient", tA.sum({1}), c.vec);
    }
  }
  SECTION("BGRADB: sums over k of op(B), one per column of D") {
    auto [ok, c] = call(CUBLASLT_EPILOGUE_BGRADB, zeros({kN}), false);
    if (ok) {
      check_near("D", prod, c.tD);
      check_near("bias gradient", tB.sum({1}), c.vec);
    }
  }
  SECTION("GELU_AUX_BIAS: aux keeps the input of the tanh GELU") {
    auto [ok, c] = call(CUBLASLT_EPILOGUE_GELU_AUX_BIAS, bias, true);
    if (ok) {
      check_near("aux", prod + bias, c.aux);
      // a device may evaluate the tanh with its fast approximation (about 2^-11 relative)
      check_near("D", gelu_tanh(prod + bias), c.tD, 2e-3);
    }
  }
  TR_CUBLAS_CHECK(cuda::cublas_library().cublasLtDestroy(h));
}

}  // namespace test_cublas_lt
