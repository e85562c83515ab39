// Device-side building blocks of the CUDA kernels: offsets of a linear index in a strided
// geometry, the CPU's dtype conversion rules, the one generic N-ary elementwise kernel
// (templated on its functor), and launch checking.
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>
#include "core/dtype.h"
#include "core/half.h"
#include "core/convert.h"
#include "core/cuda/cuda_check.h"
#include "ops/cuda/launch.h"

// Checks the launch that just happened (bad configuration, no device, missing kernel image).
#define TR_CUDA_CHECK_LAUNCH(KERNEL_NAME)                                                                  \
  do {                                                                                                     \
    cudaError_t tr_err_ = cudaGetLastError();                                                              \
    if (tr_err_ != cudaSuccess)                                                                            \
      throw ::tr::Error(::tr::str("launch of ", KERNEL_NAME, " failed at ", __FILE__, ":", __LINE__, ": ", \
                                  cudaGetErrorString(tr_err_), " (error ", int(tr_err_), ")"));            \
  } while (0)

namespace tr::cuda {

constexpr int kThreads = 256;

// kernel<<<grid, block>>>(args...): the language's launch under nvcc; in the CUDA emulation build
// (g++ against tests/cuda_emu, which has no <<<>>>) the emulator's.
template <typename... P, typename... A>
inline void launch_kernel(void (*kernel)(P...), dim3 grid, dim3 block, A&&... args) {
#if defined(__CUDACC__)
  kernel<<<grid, block>>>(std::forward<A>(args)...);
#else
  cuda_emu::launch(kernel, grid, block, 0, cudaStream_t(nullptr), std::forward<A>(args)...);
#endif
}

// Blocks for a grid-stride loop over n items (capped; the loop covers the rest).
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  int64_t b = (n + threads - 1) / threads;
  return unsigned(std::max<int64_t>(1, std::min<int64_t>(b, int64_t(1) << 20)));
}

// Offset of row-major linear index i in a geometry of `nd` dims (dims unrolled, so the
// arrays stay in parameter space).
template <int MaxD> __device__ __forceinline__ int64_t strided_offset(int64_t i, int nd, const int64_t (&sizes)[MaxD],
                                                                      const int64_t (&strides)[MaxD]) {
  if (nd == 1) return i * strides[0];
  int64_t off = 0;
#pragma unroll
  for (int d = MaxD - 1; d >= 0; --d) {
    if (d < nd) {
      int64_t q = i / sizes[d];
      off += (i - q * sizes[d]) * strides[d];
      i = q;
    }
  }
  return off;
}

// Offsets of element i for every operand of an elementwise launch.
template <int N>
__device__ __forceinline__ void elementwise_offsets(const ElementwiseArgs& a, int64_t i, int64_t (&off)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = 0;
  if (a.ndim == 1) {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = i * a.strides[k][0];
    return;
  }
  if (a.index32) {
    uint32_t r = uint32_t(i);
#pragma unroll
    for (int d = kMaxDims - 1; d >= 0; --d) {
      if (d < a.ndim) {
        uint32_t s = uint32_t(a.sizes[d]);
        uint32_t q = r / s;
        int64_t idx = int64_t(r - q * s);
        r = q;
#pragma unroll
        for (int k = 0; k < N; ++k) off[k] += idx * a.strides[k][d];
      }
    }
  } else {
    int64_t r = i;
#pragma unroll
    for (int d = kMaxDims - 1; d >= 0; --d) {
      if (d < a.ndim) {
        int64_t q = r / a.sizes[d];
        int64_t idx = r - q * a.sizes[d];
        r = q;
#pragma unroll
        for (int k = 0; k < N; ++k) off[k] += idx * a.strides[k][d];
      }
    }
  }
}

// Input k at offset off: from memory, or the host scalar's bits when ptr is null.
template <typename T> __device__ __forceinline__ T load_operand(const ElementwiseArgs& a, int k, int64_t off) {
  if (a.ptr[k] == nullptr) {
    T v;
    memcpy(static_cast<void*>(&v), &a.scalar[k], sizeof(T));  // T may be Half: bits, not a value
    return v;
  }
  return static_cast<const T*>(a.ptr[k])[off];
}

template <int K, typename... T> using nth_t = std::tuple_element_t<K, std::tuple<T...>>;

// out[i] = f(in0[i], in1[i], ...) over a broadcast, strided geometry (operand 0 is the output).
template <typename F, typename Out, typename... In> __global__ void elementwise_kernel(ElementwiseArgs a, F f) {
  constexpr int N = 1 + int(sizeof...(In));
  const int64_t step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.numel; i += step) {
    int64_t off[N];
    elementwise_offsets<N>(a, i, off);
    Out* o = static_cast<Out*>(a.ptr[0]) + off[0];
    if constexpr (N == 1) {
      *o = f();
    } else if constexpr (N == 2) {
      *o = f(load_operand<nth_t<0, In...>>(a, 1, off[1]));
    } else if constexpr (N == 3) {
      *o = f(load_operand<nth_t<0, In...>>(a, 1, off[1]), load_operand<nth_t<1, In...>>(a, 2, off[2]));
    } else {
      static_assert(N == 4, "elementwise_kernel: at most 3 inputs");
      *o = f(load_operand<nth_t<0, In...>>(a, 1, off[1]), load_operand<nth_t<1, In...>>(a, 2, off[2]),
             load_operand<nth_t<2, In...>>(a, 3, off[3]));
    }
  }
}

template <typename Out, typename... In, typename F>
void launch_elementwise(const char* name, const ElementwiseArgs& a, const F& f) {
  if (a.numel == 0) return;
  launch_kernel(elementwise_kernel<F, Out, In...>, grid_for(a.numel), kThreads, a, f);
  TR_CUDA_CHECK_LAUNCH(name);
}

}  // namespace tr::cuda
