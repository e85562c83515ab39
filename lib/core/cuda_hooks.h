// What the core needs from the CUDA runtime. Implemented by lib/core/cuda/ when the toolkit is
// found at configure time, else by lib/core/cuda_stub/ (CMake picks one; no #ifdefs elsewhere).
#pragma once
#include <cstddef>
#include <string>
#include "core/device.h"

namespace tr::cuda {

bool is_compiled();
int device_count();              // 0 when there is no GPU or no driver
std::string unavailable_reason(); // why device_count() is 0, for error messages
bool is_available();
// Copies n bytes between any two of (host, cuda:N). Host to device returns once the source has
// been read (the copy itself is queued on the device's stream); the others wait for completion.
void memcpy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n);
void synchronize(int index);

}  // namespace tr::cuda
