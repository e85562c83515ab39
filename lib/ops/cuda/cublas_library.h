// cuBLAS and cuBLASLt, opened on first use rather than linked: loading libcublasLt runs its
// initialisation (measured: 0.1 s and 22,000 page faults), which every process paid, every
// command and every rank, with or without a GPU. The functions are those of
// cublas_functions.def, called as cublas_library().cublasSgemm(...).
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>

namespace tr::cuda {

namespace cublas_fn {
// The exported forms of the names cuBLAS's C++ headers overload (with a cudaDataType compute type).
using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                  const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                  cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                const void*, const void*, cudaDataType, int, long long, const void*,
                                                cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                                long long, int, cublasComputeType_t, cublasGemmAlgo_t);
}  // namespace cublas_fn

struct CublasLibrary {
#define TR_CUBLAS_FN(library, name) decltype(&::name) name = nullptr;
#define TR_CUBLAS_OVERLOADED_FN(library, name, type) cublas_fn::type name = nullptr;
#include "ops/cuda/cublas_functions.def"
#undef TR_CUBLAS_FN
};

// Opens libcublas and libcublasLt of the CUDA major version compiled against, once; throws an
// Error naming the library and the loader's reason when it cannot, or when a function is missing.
const CublasLibrary& cublas_library();

}  // namespace tr::cuda
