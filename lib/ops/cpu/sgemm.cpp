#include "ops/cpu/sgemm.h"
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <cstdlib>
#include "core/error.h"
#include "ops/cpu/blas_info.h"
#include "ops/cpu/env_choice.h"

namespace tr::cpu {

Sgemm sgemm_library() {
  static const Sgemm s =
      env_choice("TR_SGEMM", {"onednn", "openblas"}, "onednn") == "onednn" ? Sgemm::OneDnn : Sgemm::OpenBlas;
  return s;
}

namespace {

const char* isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

}  // namespace

std::string sgemm_info() {
  if (sgemm_library() == Sgemm::OpenBlas) return blas_info();
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) + " (" +
         isa_name(dnnl_get_effective_cpu_isa()) + " kernels)" + (std::getenv("TR_SGEMM") ? " (TR_SGEMM)" : "");
}

void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
           int64_t ldb, float beta, float* C, int64_t ldc) {
  sgemm(sgemm_library(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void sgemm(Sgemm lib, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (lib == Sgemm::OneDnn) {
    const dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    TR_CHECK(st == dnnl_success, "dnnl_sgemm(", M, " x ", N, " x ", K, ") failed with status ", int(st));
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              alpha, A, int(lda), B, int(ldb), beta, C, int(ldc));
}

}  // namespace tr::cpu
