// The BLAS runs kernels that match the CPU: OpenBLAS falls back to SSE3 kernels (7x slower sgemm)
// on CPUs newer than it knows unless lib/ops/cpu/blas_coretype.cpp corrects the choice.
#include <catch2/catch.hpp>
#include <cstdlib>
#include "ops/cpu/blas_info.h"

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
