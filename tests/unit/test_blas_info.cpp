// The BLAS runs kernels that match the CPU: OpenBLAS falls back to SSE3 kernels (7x slower sgemm)
// on CPUs newer than it knows unless lib/ops/cpu/blas_coretype.cpp corrects the choice; and the
// two f32 GEMMs (oneDNN, OpenBLAS) agree with each other and with a double reference.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <algorithm>
#include <cmath>
#include <vector>
#include "ops/cpu/blas_info.h"
#include "ops/cpu/sgemm.h"

namespace test_blas_info {

TEST_CASE("OpenBLAS uses AVX2 or AVX-512 kernels on a CPU that has them", "[blas]") {
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    WARN("skipped: this CPU has no AVX2+FMA");
    return;
  }
  const std::string info = tr::cpu::blas_info();
  if (info.find("from the environment") != std::string::npos || std::getenv("TR_BLAS_AUTODETECT") != nullptr) {
    WARN("skipped: the kernels were chosen by the environment: " << info);
    return;
  }
  INFO(info);
  for (const char* fallback : {"Prescott", "Core2", "Penryn", "Nehalem", "Sandybridge", "Unknown"})
    CHECK(info.find(std::string(", ") + fallback + " kernels") == std::string::npos);
}

TEST_CASE("sgemm: oneDNN and OpenBLAS compute the same products", "[blas]") {
  using tr::cpu::Sgemm;
  INFO(tr::cpu::sgemm_info());
  struct Shape3 {
    int64_t M, N, K;
  };
  uint32_t seed = 1;
  auto next = [&] {
    seed = seed * 1664525u + 1013904223u;
    return float(seed >> 8) / float(1 << 24) - 0.5f;
  };
  for (Shape3 s : {Shape3{1, 1, 1}, Shape3{7, 5, 3}, Shape3{128, 10, 512}, Shape3{33, 130, 65}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (float beta : {0.0f, 1.0f}) {
          INFO(s.M << "x" << s.N << "x" << s.K << " ta=" << ta << " tb=" << tb << " beta=" << beta);
          std::vector<float> a(size_t(s.M * s.K)), b(size_t(s.K * s.N)), c0(size_t(s.M * s.N));
          for (auto& x : a) x = next();
          for (auto& x : b) x = next();
          for (auto& x : c0) x = next();
          std::vector<float> c1 = c0, c2 = c0;
          const int64_t lda = ta ? s.M : s.K, ldb = tb ? s.K : s.N;
          tr::cpu::sgemm(Sgemm::OneDnn, ta, tb, s.M, s.N, s.K, 0.5f, a.data(), lda, b.data(), ldb, beta, c1.data(),
                         s.N);
          tr::cpu::sgemm(Sgemm::OpenBlas, ta, tb, s.M, s.N, s.K, 0.5f, a.data(), lda, b.data(), ldb, beta, c2.data(),
                         s.N);
          // against a double reference too
          double worst = 0;
          for (int64_t i = 0; i < s.M; ++i)
            for (int64_t j = 0; j < s.N; ++j) {
              double r = beta * double(c0[size_t(i * s.N + j)]);
              for (int64_t k = 0; k < s.K; ++k)
                r += 0.5 * double(a[size_t(ta ? k * s.M + i : i * s.K + k)]) *
                     double(b[size_t(tb ? j * s.K + k : k * s.N + j)]);
              worst = std::max({worst, std::abs(c1[size_t(i * s.N + j)] - r), std::abs(c2[size_t(i * s.N + j)] - r)});
            }
          CHECK(worst < 1e-5 * double(s.K));
        }
      }
    }
  }
}

}  // namespace test_blas_info
