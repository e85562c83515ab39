// Check macros for cuBLAS, cuDNN and NCCL calls (cuda_check.h's pattern): the failing call,
// file:line and the library's status name.
#pragma once
#include <cublas_v2.h>
#include <cudnn.h>
#include <nccl.h>
#include "core/error.h"
#include "ops/cuda/cublas_library.h"

#define TR_CUBLAS_CHECK(call)                                                                                         \
  do {                                                                                                                \
    cublasStatus_t tr_st_ = (call);                                                                                   \
    if (tr_st_ != CUBLAS_STATUS_SUCCESS)                                                                              \
      throw ::tr::Error(::tr::str(#call, " failed at ", __FILE__, ":", __LINE__, ": ",                                \
                                  ::tr::cuda::cublas_library().cublasGetStatusName(tr_st_), " (status ", int(tr_st_), \
                                  ")"));                                                                              \
  } while (0)

#define TR_CUDNN_CHECK(call)                                                                                        \
  do {                                                                                                              \
    cudnnStatus_t tr_st_ = (call);                                                                                  \
    if (tr_st_ != CUDNN_STATUS_SUCCESS)                                                                             \
      throw ::tr::Error(::tr::str(#call, " failed at ", __FILE__, ":", __LINE__, ": ", cudnnGetErrorString(tr_st_), \
                                  " (status ", int(tr_st_), ")"));                                                  \
  } while (0)

#define TR_NCCL_CHECK(call)                                                                                        \
  do {                                                                                                             \
    ncclResult_t tr_st_ = (call);                                                                                  \
    if (tr_st_ != ncclSuccess)                                                                                     \
      throw ::tr::Error(::tr::str(#call, " failed at ", __FILE__, ":", __LINE__, ": ", ncclGetErrorString(tr_st_), \
                                  " (result ", int(tr_st_), ")"));                                                 \
  } while (0)
