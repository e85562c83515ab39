// Which OpenBLAS kernels run our sgemm/dgemm.
//
// Debian's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernels from the CPU's vendor, family and
// model when the library loads. A CPU newer than the library (e.g. family 6 model 207, Emerald
// Rapids, in a VM that reports "Intel Xeon Processor") falls back to the SSE3 "Prescott" kernels:
// sgemm at 24 GFLOP/s per core instead of 180 with the AVX-512 ones, measured on that machine.
// The library's documented remedy is OPENBLAS_CORETYPE, read by its load-time constructor, which
// has run before any of our code. So a static initializer (before main, before any BLAS call)
// compares the library's choice with what the CPU and the OS enable (__builtin_cpu_supports checks
// both), and where the library chose less, sets the variable and re-runs the library's own dynamic
// initialisation (gotoblas_dynamic_quit/init, exported by DYNAMIC_ARCH builds): the same path as
// the user setting the variable. A value the user set is left alone.
#include <cstdlib>
#include <string>
#include "ops/cpu/blas_info.h"

extern "C" {
char* openblas_get_corename(void);
// Weak: a BLAS built without DYNAMIC_ARCH has neither (and nothing to choose).
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace tr::cpu {

namespace {

const char* chosen_coretype = nullptr;  // set once before main; read-only afterwards

// The best OpenBLAS kernel family this CPU can run, by instruction set.
const char* coretype_for_this_cpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

// Kernel families OpenBLAS 0.3.21 may pick that lack AVX2+FMA or AVX-512 sgemm kernels.
bool is_fallback_core(const std::string& core) {
  for (const char* c : {"Prescott", "Core2",      "Penryn",     "Dunnington",  "Nehalem",   "Sandybridge",  "Atom",
                        "Katmai",   "Coppermine", "Northwood",  "Banias",      "Opteron",   "Opteron_SSE3", "Barcelona",
                        "Bobcat",   "Bulldozer",  "Piledriver", "Steamroller", "Excavator", "Unknown"})
    if (core == c) return true;
  return false;
}

void choose_openblas_coretype() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || std::getenv("TR_BLAS_AUTODETECT") != nullptr) return;
  if (gotoblas_dynamic_init == nullptr || gotoblas_dynamic_quit == nullptr) return;
  const char* want = coretype_for_this_cpu();
  if (want == nullptr) return;
  const std::string have = openblas_get_corename();
  // Only a fallback is replaced: where the library knows the CPU (e.g. "Zen" on an AVX-512 Zen 4),
  // its choice has not been measured against ours.
  if (!is_fallback_core(have)) return;
  if (setenv("OPENBLAS_CORETYPE", want, 1) != 0) return;
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  chosen_coretype = want;
}

const int chosen_at_start = (choose_openblas_coretype(), 0);

}  // namespace

std::string blas_info() {
  std::string s = "OpenBLAS, ";
  s += openblas_get_corename();
  s += " kernels";
  if (chosen_coretype != nullptr)
    s += " (OPENBLAS_CORETYPE chosen by trainer from the CPU's instruction sets)";
  else if (std::getenv("OPENBLAS_CORETYPE") != nullptr)
    s += " (OPENBLAS_CORETYPE from the environment)";
  return s;
}

}  // namespace tr::cpu
