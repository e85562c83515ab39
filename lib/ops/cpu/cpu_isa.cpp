#include "ops/cpu/cpu_isa.h"
#include "ops/cpu/env_choice.h"

namespace tr::cpu {

bool use_avx512() {
  static const bool ok =
      env_choice("TR_CPU_ISA", {"avx2", "avx512"}, "avx512") == "avx512" && __builtin_cpu_supports("avx512f");
  return ok;
}

}  // namespace tr::cpu
