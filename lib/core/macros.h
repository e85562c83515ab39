// Host/device qualifiers so that scalar math compiles for both the CPU and CUDA.
#pragma once
#if defined(__CUDACC__)
#define TR_HD __host__ __device__ __forceinline__
#define TR_HOST_DEVICE __host__ __device__
#else
#define TR_HD inline
#define TR_HOST_DEVICE
#endif
