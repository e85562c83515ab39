// CUDA runtime hooks: device discovery that tolerates a machine with no driver (error 35), the
// caching allocator per device, and host<->device copies.
#include "core/cuda_hooks.h"
#include "core/format_bytes.h"
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>
#include "core/caching_allocator.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/device_memory.h"
#include "core/cuda/pinned_staging.h"

namespace tr::cuda {

namespace {
struct Probe {
  int count = 0;
  std::string reason;
};
const Probe& probe() {
  static Probe p = [] {
    Probe r;
    int n = 0;  // left unwritten on failure (error 35 without a driver)
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      r.reason = str("cudaGetDeviceCount failed: ", cudaGetErrorString(e), " (error ", int(e), ")");
      cudaGetLastError();  // clear the sticky error
      n = 0;
    } else if (n == 0) {
      r.reason = "no CUDA devices are visible";
    }
    r.count = n;
    return r;
  }();
  return p;
}

Allocator& device_allocator(int index) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<CachingAllocator>> allocs;
  std::lock_guard<std::mutex> g(mu);
  if (allocs.empty()) allocs.resize(size_t(std::max(probe().count, 1)));
  TR_CHECK(index >= 0 && index < int(allocs.size()), "cuda:", index, " does not exist");
  if (!allocs[index]) allocs[index] = std::make_unique<CachingAllocator>(device_memory(index));
  return *allocs[index];
}

std::atomic<void (*)()> after_sync_hook{nullptr};
void after_sync() {
  if (auto h = after_sync_hook.load()) h();
}

[[maybe_unused]] const bool registered = [] {
  register_allocator(DeviceType::CUDA, device_allocator);
  return true;
}();
}  // namespace

bool is_compiled() { return true; }
int device_count() { return probe().count; }
std::string unavailable_reason() { return probe().reason.empty() ? "CUDA is available" : probe().reason; }
bool is_available() { return device_count() > 0; }

void memcpy(void* dst, Device dd, const void* src, Device sd, size_t n) {
  if (n == 0) return;
  if (dd.is_cpu() && sd.is_cpu()) {
    std::memcpy(dst, src, n);
    return;
  }
  if (sd.is_cpu()) {  // returns before the copy is done; stream order keeps it ahead of later launches
    copy_to_device_staged(dst, src, n, dd.index);
    return;
  }
  // on the source's device: the copy then follows the work queued there (the current device's
  // default stream knows nothing of another device's)
  if (dd.is_cuda() && dd.index != sd.index) synchronize(dd.index);  // the destination's pending work first
  {
    DeviceGuard g(sd.index);
    TR_CUDA_CHECK(cudaMemcpy(dst, src, n, dd.is_cpu() ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice));
  }
  if (dd.is_cpu()) after_sync();
}

void set_device(int index) { TR_CUDA_CHECK(cudaSetDevice(index)); }

void synchronize(int index) {
  {
    DeviceGuard g(index);
    TR_CUDA_CHECK(cudaDeviceSynchronize());
  }
  after_sync();
}

void set_after_sync_hook(void (*hook)()) { after_sync_hook.store(hook); }

void* alloc_pinned(size_t n) {
  void* p = nullptr;
  TR_CUDA_CHECK(cudaHostAlloc(&p, std::max<size_t>(n, 1), cudaHostAllocDefault));
  return p;
}

void free_pinned(void* p) {
  if (p) TR_CUDA_CHECK(cudaFreeHost(p));
}

std::string device_description(int index) {
  cudaDeviceProp prop{};
  TR_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  size_t free_b = 0, total_b = 0;
  TR_CHECK(memory_info(index, free_b, total_b), "cuda:", index, ": cudaMemGetInfo failed");
  return str(prop.name, ", compute capability ", prop.major, ".", prop.minor, ", ", format_bytes(double(total_b)), " (",
             format_bytes(double(free_b)), " free)");
}

}  // namespace tr::cuda
