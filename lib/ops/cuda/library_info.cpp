// cuda_info(): library versions from cublasGetProperty, cudnnGetVersion, ncclGetVersion and the
// runtime; none of these needs a device, and they make the binary link cuBLAS, cuDNN and NCCL.
#include "ops/cuda_info.h"
#include "core/cuda/cuda_check.h"
#include "ops/cuda/library_check.h"

namespace tr::cuda {

namespace {
// CUDA's encoding 1000 * major + 10 * minor.
std::string cuda_version(int v) { return str(v / 1000, ".", (v % 1000) / 10); }
}  // namespace

std::string cuda_info() {
  int runtime = 0, driver = 0;
  TR_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  // Without a driver this returns success and 0 (no libcuda is loaded).
  TR_CUDA_CHECK(cudaDriverGetVersion(&driver));
  int bl_major = 0, bl_minor = 0, bl_patch = 0;
  TR_CUBLAS_CHECK(cublas_library().cublasGetProperty(MAJOR_VERSION, &bl_major));
  TR_CUBLAS_CHECK(cublas_library().cublasGetProperty(MINOR_VERSION, &bl_minor));
  TR_CUBLAS_CHECK(cublas_library().cublasGetProperty(PATCH_LEVEL, &bl_patch));
  // cuDNN 9 encodes major * 10000 + minor * 100 + patch.
  const size_t dnn = cudnnGetVersion();
  int nccl = 0;
  TR_NCCL_CHECK(ncclGetVersion(&nccl));  // major * 10000 + minor * 100 + patch (NCCL >= 2.9)
  return str("CUDA runtime ", cuda_version(runtime), ", driver ", driver ? cuda_version(driver) : std::string("none"),
             ", cuBLAS ", bl_major, ".", bl_minor, ".", bl_patch, ", cuDNN ", dnn / 10000, ".", (dnn % 10000) / 100,
             ".", dnn % 100, ", NCCL ", nccl / 10000, ".", (nccl % 10000) / 100, ".", nccl % 100);
}

}  // namespace tr::cuda
