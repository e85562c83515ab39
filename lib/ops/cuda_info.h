// Versions of the CUDA libraries this build links, for `trainer info`; no GPU needed.
// Implemented by lib/ops/cuda/library_info.cpp, or lib/ops/cuda_stub/ in a build without CUDA.
#pragma once
#include <string>

namespace tr::cuda {

// e.g. "CUDA runtime 13.0, driver none, cuBLAS 13.1.0, cuDNN 9.19.0, NCCL 2.28.9"
std::string cuda_info();

}  // namespace tr::cuda
