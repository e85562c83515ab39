#include "ops/cpu/cpu_isa.h"
#include <cstdlib>
#include <string>
#include "core/error.h"

namespace tr::cpu {

bool use_avx512() {
  static const bool ok = [] {
    if (const char* e = std::getenv("TR_CPU_ISA")) {
      const std::string v = e;
      TR_CHECK(v == "avx2" || v == "avx512", "TR_CPU_ISA=", v, ": expected avx2 or avx512");
      if (v == "avx2") return false;
    }
    return bool(__builtin_cpu_supports("avx512f"));
  }();
  return ok;
}

}  // namespace tr::cpu
