// cuda_info(): library versions from cublasGetProperty, cudnnGetVersion, ncclGetVersion and the
// runtime; none of these needs a device. cuBLAS is opened here (cublas_library.h).
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
  std::string cublas;
  try {
    int major = 0, minor = 0, patch = 0;
    TR_CUBLAS_CHECK(cublas_library().cublasGetProperty(MAJOR_VERSION, &major));
    TR_CUBLAS_CHECK(cublas_library().cublasGetProperty(MINOR_VERSION, &minor));
    TR_CUBLAS_CHECK(cublas_library().cublasGetProperty(PATCH_LEVEL, &patch));
    cublas = str(major, ".", minor, ".", patch);
  } catch (const Error& e) {  // opened on first use: a machine may lack it (a GPU run then stops with this)
    cublas = str("not loadable: ", e.what());
  }
  // cuDNN 9 encodes major * 10000 + minor * 100 + patch.
  const size_t dnn = cudnnGetVersion();
  int nccl = 0;
  TR_NCCL_CHECK(ncclGetVersion(&nccl));  // major * 10000 + minor * 100 + patch (NCCL >= 2.9)
  return str("CUDA runtime ", cuda_version(runtime), ", driver ", driver ? cuda_version(driver) : std::string("none"),
             ", cuBLAS ", cublas, ", cuDNN ", dnn / 10000, ".", (dnn % 10000) / 100, ".", dnn % 100, ", NCCL ",
             nccl / 10000, ".", (nccl % 10000) / 100, ".", nccl % 100);
}

}  // namespace tr::cuda
