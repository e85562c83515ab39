#include "core/cuda/pinned_staging.h"
#include <cuda_runtime.h>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"

namespace tr::cuda {

namespace {

struct Block {
  void* host = nullptr;
  size_t bytes = 0;
  cudaEvent_t copied = nullptr;  // recorded after the copy that reads the block
};

// Blocks per device; never freed (the process keeps what its largest batches needed).
class Staging {
 public:
  void copy(void* dst, const void* src, size_t n, int device) {
    std::lock_guard<std::mutex> g(mu_);
    Block& b = idle_block(n, device);
    std::memcpy(b.host, src, n);
    TR_CUDA_CHECK(cudaMemcpyAsync(dst, b.host, n, cudaMemcpyHostToDevice, 0));
    TR_CUDA_CHECK(cudaEventRecord(b.copied, 0));
  }

 private:
  static constexpr size_t kMinBlock = size_t(1) << 16;
  static constexpr size_t kMaxBusy = 64;  // more copies in flight than this: wait for the oldest

  // A block of at least n bytes whose last copy has completed (the smallest such), or a new one.
  Block& idle_block(size_t n, int device) {
    std::vector<Block>& blocks = blocks_[device];
    Block* best = nullptr;
    size_t busy = 0;
    for (Block& b : blocks) {
      const cudaError_t q = cudaEventQuery(b.copied);
      if (q == cudaErrorNotReady) {
        ++busy;
        continue;
      }
      TR_CUDA_CHECK(q);
      if (b.bytes >= n && (!best || b.bytes < best->bytes)) best = &b;
    }
    if (best) return *best;
    if (busy >= kMaxBusy) {  // the host is far ahead of the GPU: wait rather than pin more memory
      for (Block& b : blocks) TR_CUDA_CHECK(cudaEventSynchronize(b.copied));
      return idle_block(n, device);
    }
    Block b;
    b.bytes = std::max(kMinBlock, n);
    TR_CUDA_CHECK(cudaHostAlloc(&b.host, b.bytes, cudaHostAllocDefault));
    TR_CUDA_CHECK(cudaEventCreateWithFlags(&b.copied, cudaEventDisableTiming));
    blocks.push_back(b);
    return blocks.back();
  }

  std::mutex mu_;
  std::map<int, std::vector<Block>> blocks_;
};

}  // namespace

void copy_to_device_staged(void* dst, const void* src, size_t n, int device) {
  static Staging* staging = new Staging;  // leaked: pinned memory must outlive static destructors' copies
  DeviceGuard g(device);
  staging->copy(dst, src, n, device);
}

}  // namespace tr::cuda
