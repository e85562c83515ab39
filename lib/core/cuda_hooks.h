// What the core needs from the CUDA runtime. Implemented by lib/ops/cuda/ when the toolkit is
// found at configure time, else by lib/ops/cuda_stub/ (CMake picks one; no #ifdefs elsewhere).
#pragma once
#include <cstddef>
#include <string>
#include "core/device.h"

namespace tr::cuda {

bool is_compiled();
int device_count();              // 0 when there is no GPU or no driver
std::string unavailable_reason(); // why device_count() is 0, for error messages
bool is_available();
// Copies n bytes between any two of (host, cuda:N) and waits for completion.
void memcpy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n);
void synchronize(int index);
// Versions of the CUDA runtime, driver, cuBLAS, cuDNN and NCCL this build links (no GPU needed),
// e.g. "CUDA runtime 13.0, driver none, cuBLAS 13.1.0, cuDNN 9.19.0, NCCL 2.28.9".
std::string cuda_info();

}  // namespace tr::cuda
