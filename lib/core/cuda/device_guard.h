// Makes a CUDA device current for a scope and restores the previous one (c10's CUDAGuard): core's
// runtime hooks, the ops' launchers and the NCCL process group all use this one.
#pragma once
#include <cuda_runtime.h>
#include "core/cuda/cuda_check.h"
#include "core/tensor.h"

namespace tr::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(int index) {
    TR_CUDA_CHECK(cudaGetDevice(&prev_));
    if (prev_ != index) TR_CUDA_CHECK(cudaSetDevice(index));
  }
  explicit DeviceGuard(const Tensor& t) : DeviceGuard(t.device().index) {}
  ~DeviceGuard() {
    // unchecked: a destructor must not throw, and a failure here resurfaces at the next checked call
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur != prev_ && prev_ >= 0) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

}  // namespace tr::cuda
