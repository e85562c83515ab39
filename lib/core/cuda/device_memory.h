// cuda:N as the caching allocator's device: cudaMalloc / cudaFree and events on its streams.
#pragma once
#include <cstddef>
#include <memory>
#include "core/caching_allocator.h"

namespace tr::cuda {

std::unique_ptr<DeviceMemory> device_memory(int index);
// Free and total bytes of cuda:index; false (and the error cleared) when the runtime cannot say.
bool memory_info(int index, size_t& free_b, size_t& total_b);

}  // namespace tr::cuda
