// What the core needs from the CUDA runtime. Implemented by lib/core/cuda/ when the toolkit is
// found at configure time, else by lib/core/cuda_stub/ (CMake picks one; no #ifdefs elsewhere).
#pragma once
#include <cstddef>
#include <string>
#include "core/device.h"

namespace tr::cuda {

bool is_compiled();
int device_count();                // 0 when there is no GPU or no driver
std::string unavailable_reason();  // why device_count() is 0, for error messages
bool is_available();
// Copies n bytes between any two of (host, cuda:N). Host to device returns once the source has
// been read (the copy itself is queued on the device's stream); the others wait for completion.
void memcpy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n);
void synchronize(int index);
// Makes cuda:index the process's current device (torch.cuda.set_device).
void set_device(int index);
// Called after each copy from a device to the host and each synchronize, once the host has waited
// for the device: ops raise there the errors their kernels recorded (ops/deferred_check.h).
void set_after_sync_hook(void (*hook)());
// Page-locked host memory (cudaHostAlloc): a copy from a device into it runs at the bus's speed
// without a bounce buffer. Not for builds or machines without a device (it throws there); freeing
// it waits for the devices, so it is for buffers kept and reused.
void* alloc_pinned(size_t n);
void free_pinned(void* p);
// "NVIDIA H100 80GB HBM3, compute capability 9.0, 79.19 GiB (78.60 GiB free)" for cuda:index.
std::string device_description(int index);

// A named phase of the host's work (an NVTX range): Nsight Systems shows it on a GPU, and the CUDA
// emulator counts the launches, copies and host waits of each (tests/cuda_emu/counters.cpp).
// Ranges nest per thread; a build without CUDA ignores them.
void range_push(const char* name);
void range_pop();
class Range {
 public:
  explicit Range(const char* name) { range_push(name); }
  ~Range() { range_pop(); }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
};

}  // namespace tr::cuda
