// cuda_info() of a build without the CUDA toolkit.
#include "ops/cuda_info.h"

namespace tr::cuda {

std::string cuda_info() { return "not compiled in"; }

}  // namespace tr::cuda
