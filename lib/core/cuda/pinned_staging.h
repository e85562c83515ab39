// Host-to-device copies through pinned staging blocks: the source is copied into a page-locked
// block on the host and cudaMemcpyAsync takes it from there, so the call returns at once (a copy
// from pageable memory first waits for every earlier launch on the stream, stalling the host
// while the GPU drains). A block is reused once the event recorded after its copy has completed.
#pragma once
#include <cstddef>

namespace tr::cuda {

// dst (device memory of cuda:device) = src (any host memory), ordered on the default stream.
void copy_to_device_staged(void* dst, const void* src, size_t n, int device);

}  // namespace tr::cuda
