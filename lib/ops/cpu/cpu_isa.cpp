#include "ops/cpu/cpu_isa.h"
#include "ops/cpu/env_choice.h"

namespace tr::cpu {

bool use_avx512() {
  static const bool ok =
      env_choice("TR_CPU_ISA", {"avx2", "avx512"}, "avx512") == "avx512" && __builtin_cpu_supports("avx512f");
  return ok;
}

bool use_avx512_bf16() {
  static const bool ok = use_avx512() && __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl");
  return ok;
}

}  // namespace tr::cpu
