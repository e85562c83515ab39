#include "core/cuda/device_memory.h"
#include "core/format_bytes.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"

namespace tr::cuda {

bool memory_info(int index, size_t& free_b, size_t& total_b) {
  DeviceGuard g(index);
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) return true;
  cudaGetLastError();
  return false;
}

namespace {

class CudaDeviceMemory : public DeviceMemory {
 public:
  explicit CudaDeviceMemory(int index) : index_(index) {}

  void* alloc(size_t n) override {
    void* p = nullptr;
    cudaError_t e;
    {
      DeviceGuard g(index_);
      e = cudaMalloc(&p, n);
    }
    if (e == cudaErrorMemoryAllocation) {  // the allocator returns its cache and retries
      cudaGetLastError();
      return nullptr;
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw Error(str("cudaMalloc of ", n, " bytes on cuda:", index_, " failed: ", cudaGetErrorString(e), " (error ",
                      int(e), ")"));
    }
    return p;
  }

  // unchecked: also called at exit, when the runtime may have shut down
  void free(void* p) override { cudaFree(p); }

  Event record_event(Stream s) override {
    DeviceGuard g(index_);
    cudaEvent_t e = nullptr;
    TR_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    TR_CUDA_CHECK(cudaEventRecord(e, static_cast<cudaStream_t>(s)));
    return e;
  }

  bool event_done(Event e) override {
    const cudaError_t q = cudaEventQuery(static_cast<cudaEvent_t>(e));
    if (q == cudaErrorNotReady) {
      cudaGetLastError();  // not an error: the work is still running
      return false;
    }
    TR_CUDA_CHECK(q);
    return true;
  }

  void wait_event(Event e) override { TR_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(e))); }
  void destroy_event(Event e) override { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }

  std::string describe() override {
    size_t free_b = 0, total_b = 0;
    const bool ok = memory_info(index_, free_b, total_b);
    return str(
        "cuda:", index_,
        ok ? str(" (", format_bytes(double(free_b)), " free of ", format_bytes(double(total_b)), ")") : std::string());
  }

 private:
  int index_;
};

}  // namespace

std::unique_ptr<DeviceMemory> device_memory(int index) { return std::make_unique<CudaDeviceMemory>(index); }

}  // namespace tr::cuda
