#pragma once
#include <string>

namespace tr::cpu {

// The BLAS behind f32/f64 matrix products and the kernels it runs, e.g.
// "OpenBLAS, SkylakeX kernels (OPENBLAS_CORETYPE chosen by trainer from the CPU's instruction sets)".
std::string blas_info();

}  // namespace tr::cpu
