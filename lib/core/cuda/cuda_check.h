// Check macros for CUDA runtime / cuBLAS / cuDNN / NCCL calls: the failing call and file:line.
#pragma once
#include <cuda_runtime.h>
#include "core/error.h"

#define TR_CUDA_CHECK(call)                                                                                         \
  do {                                                                                                              \
    cudaError_t tr_err_ = (call);                                                                                   \
    if (tr_err_ != cudaSuccess)                                                                                     \
      throw ::tr::Error(::tr::str(#call, " failed at ", __FILE__, ":", __LINE__, ": ", cudaGetErrorString(tr_err_), \
                                  " (error ", int(tr_err_), ")"));                                                  \
  } while (0)
