// CUDA multi-tensor kernels of _fused_sgd_ and _fused_adam_: one block per chunk of one tensor
// (the tables say which), the update of ops/optim_math.h per element in the compute type.
#include "ops/cuda/loops.cuh"

namespace tr::cuda {

namespace {

template <typename T> __global__ void fused_sgd_kernel(optim_math::SgdScalars<acc_t<T>> s, const FusedTensor* tensors,
                                                       const FusedChunk* chunks) {
  using A = acc_t<T>;
  const FusedChunk c = chunks[blockIdx.x];
  const FusedTensor& t = tensors[c.tensor];
  T* p = static_cast<T*>(t.ptr[0]);
  const T* g = static_cast<const T*>(t.ptr[1]);
  T* buf = static_cast<T*>(t.ptr[2]);
  const int64_t end = c.start + kFusedChunk < t.numel ? c.start + kFusedChunk : t.numel;
  for (int64_t k = c.start + threadIdx.x; k < end; k += blockDim.x)
    optim_math::sgd_at<A>(p, g, buf, t.first != 0, k, s);
}

template <typename T> __global__ void fused_adam_kernel(const FusedTensor* tensors, const FusedChunk* chunks) {
  using A = acc_t<T>;
  const FusedChunk c = chunks[blockIdx.x];
  const FusedTensor& t = tensors[c.tensor];
  const optim_math::AdamScalars<A> s = optim_math::scalars_as<A>(t.adam);
  T* p = static_cast<T*>(t.ptr[0]);
  const T* g = static_cast<const T*>(t.ptr[1]);
  T* m = static_cast<T*>(t.ptr[2]);
  T* v = static_cast<T*>(t.ptr[3]);
  T* vmax = static_cast<T*>(t.ptr[4]);
  const int64_t end = c.start + kFusedChunk < t.numel ? c.start + kFusedChunk : t.numel;
  for (int64_t k = c.start + threadIdx.x; k < end; k += blockDim.x) optim_math::adam_at<A>(p, g, m, v, vmax, k, s);
}

}  // namespace

void launch_fused_sgd(DType t, const optim_math::SgdScalars<double>& sd, const FusedTensor* tensors,
                      const FusedChunk* chunks, int64_t n_chunks) {
  if (n_chunks == 0) return;
  TR_DISPATCH_FLOAT(t, "_fused_sgd_", [&] {
    using A = acc_t<scalar_t>;
    launch_kernel(fused_sgd_kernel<scalar_t>, unsigned(n_chunks), kThreads, optim_math::scalars_as<A>(sd), tensors,
                  chunks);
    TR_CUDA_CHECK_LAUNCH("fused_sgd_kernel");
  });
}

void launch_fused_adam(DType t, const FusedTensor* tensors, const FusedChunk* chunks, int64_t n_chunks) {
  if (n_chunks == 0) return;
  TR_DISPATCH_FLOAT(t, "_fused_adam_", [&] {
    launch_kernel(fused_adam_kernel<scalar_t>, unsigned(n_chunks), kThreads, tensors, chunks);
    TR_CUDA_CHECK_LAUNCH("fused_adam_kernel");
  });
}

}  // namespace tr::cuda
