// CUDA kernels of _fused_total_norm and _fused_clip_scale_ (ops/clip_math.h states the math): one
// block per chunk sums its elements' norm terms; one block then combines each tensor's chunks in
// order, rounds the tensor's norm to its dtype and combines those; the scale reads the total on
// the device. No atomics: the order, and so the result, is fixed.
#include "ops/clip_math.h"
#include "ops/cuda/fused_clip_launch.h"
#include "ops/cuda/loops.cuh"

namespace tr::cuda {

namespace {

// The block's combination of v (every thread's), valid in thread 0.
template <typename A> __device__ A block_combine(A v, A p) {
  __shared__ unsigned char raw[kThreads * sizeof(double)];
  A* s = reinterpret_cast<A*>(raw);
  s[threadIdx.x] = v;
  __syncthreads();
  for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] = clip_math::norm_combine(s[threadIdx.x], s[threadIdx.x + k], p);
    __syncthreads();
  }
  return s[0];
}

template <typename T>
__global__ void norm_partial_kernel(acc_t<T> p, const NormTensor* tensors, const NormChunk* chunks, acc_t<T>* partial) {
  using A = acc_t<T>;
  const NormChunk c = chunks[blockIdx.x];
  const NormTensor& t = tensors[c.tensor];
  const T* x = static_cast<const T*>(t.ptr);
  const int64_t end = c.start + clip_math::kNormChunk < t.numel ? c.start + clip_math::kNormChunk : t.numel;
  A acc = A(0);
  for (int64_t k = c.start + threadIdx.x; k < end; k += blockDim.x)
    acc = clip_math::norm_combine(acc, clip_math::norm_term(A(x[k]), p), p);
  acc = block_combine(acc, p);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

template <typename T> __global__ void norm_total_kernel(acc_t<T> p, const NormTensor* tensors, int64_t n,
                                                        int64_t n_chunks, const acc_t<T>* partial, T* total) {
  using A = acc_t<T>;
  A acc = A(0);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t b = tensors[i].chunk_begin, e = i + 1 < n ? tensors[i + 1].chunk_begin : n_chunks;
    A s = A(0);
    for (int64_t c = b; c < e; ++c) s = clip_math::norm_combine(s, partial[c], p);
    const A norm = A(T(clip_math::norm_finish(s, p)));  // the tensor's norm in its dtype
    acc = clip_math::norm_combine(acc, clip_math::norm_term(norm, p), p);
  }
  acc = block_combine(acc, p);
  if (threadIdx.x == 0) *total = T(clip_math::norm_finish(acc, p));
}

template <typename T> __global__ void clip_scale_kernel(acc_t<T> max_norm, const NormTensor* tensors,
                                                        const NormChunk* chunks, const T* total) {
  using A = acc_t<T>;
  const A coef = A(T(clip_math::clip_coef(A(*total), max_norm)));
  const NormChunk c = chunks[blockIdx.x];
  const NormTensor& t = tensors[c.tensor];
  T* x = static_cast<T*>(t.ptr);
  const int64_t end = c.start + clip_math::kNormChunk < t.numel ? c.start + clip_math::kNormChunk : t.numel;
  for (int64_t k = c.start + threadIdx.x; k < end; k += blockDim.x) x[k] = T(A(x[k]) * coef);
}

}  // namespace

void launch_fused_total_norm(DType t, double norm_type, const NormTensor* tensors, int64_t n, const NormChunk* chunks,
                             int64_t n_chunks, void* partial, void* total) {
  TR_DISPATCH_FLOAT(t, "_fused_total_norm", [&] {
    using A = acc_t<scalar_t>;
    if (n_chunks > 0) {
      launch_kernel(norm_partial_kernel<scalar_t>, unsigned(n_chunks), kThreads, A(norm_type), tensors, chunks,
                    static_cast<A*>(partial));
      TR_CUDA_CHECK_LAUNCH("norm_partial_kernel");
    }
    launch_kernel(norm_total_kernel<scalar_t>, 1u, kThreads, A(norm_type), tensors, n, n_chunks,
                  static_cast<const A*>(partial), static_cast<scalar_t*>(total));
    TR_CUDA_CHECK_LAUNCH("norm_total_kernel");
  });
}

void launch_fused_clip_scale(DType t, double max_norm, const NormTensor* tensors, const NormChunk* chunks,
                             int64_t n_chunks, const void* total) {
  if (n_chunks == 0) return;
  TR_DISPATCH_FLOAT(t, "_fused_clip_scale_", [&] {
    using A = acc_t<scalar_t>;
    launch_kernel(clip_scale_kernel<scalar_t>, unsigned(n_chunks), kThreads, A(max_norm), tensors, chunks,
                  static_cast<const scalar_t*>(total));
    TR_CUDA_CHECK_LAUNCH("clip_scale_kernel");
  });
}

}  // namespace tr::cuda
