// The f32 GEMM behind mm, bmm and the convolutions: oneDNN's sgemm (its JIT kernels, Debian's
// libdnnl) or OpenBLAS's. Measured on gpt_char's and fmnist_mlp's shapes on a Zen 5 (2 threads,
// caches flushed between calls as inside a training step): oneDNN 1.22x OpenBLAS over the GPT's
// products, up to 1.57x on [4096, 128] x [128, 128]; OpenBLAS ahead on one shape (0.8x on the
// MLP's 128 x 512 x 512 forward, warm). Fixed per process, so that a run's numbers do not depend
// on timing; TR_SGEMM=onednn|openblas overrides the default (oneDNN).
#pragma once
#include <cstdint>
#include <string>

namespace tr::cpu {

enum class Sgemm { OneDnn, OpenBlas };
Sgemm sgemm_library();
// e.g. "oneDNN 2.6.3 (avx512_core_bf16 kernels)"
std::string sgemm_info();

// C[M, N] = alpha op(A) op(B) + beta C, row-major; op(X) = X^T where tX; by sgemm_library(), or
// by the given library.
void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
           int64_t ldb, float beta, float* C, int64_t ldc);
void sgemm(Sgemm lib, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace tr::cpu
