// A process-wide kernel choice read from the environment (TR_SGEMM, TR_CONV, TR_BF16_GEMM,
// TR_CPU_ISA): its value if set, which must be one of `allowed` (else one error naming them),
// otherwise `fallback`.
#pragma once
#include <initializer_list>
#include <string>

namespace tr::cpu {

std::string env_choice(const char* name, std::initializer_list<const char*> allowed, const std::string& fallback);

}  // namespace tr::cpu
