// CUDA matrix product of integer dtypes (cuBLAS has none): out[b, i, j] = sum_k a[b, i, k] bm[b, k, j]
// accumulated in int64 as the CPU loop; float dtypes go through cuBLAS (matmul.cpp).
#include "ops/cuda/loops.cuh"

namespace tr::cuda {

namespace {

template <typename T> __global__ void int_gemm_kernel(IntGemmArgs g) {
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);
  T* out = static_cast<T*>(g.out);
  const int64_t total = g.batch * g.M * g.N;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(blockDim.x) * gridDim.x) {
    const int64_t j = e % g.N, row = e / g.N, i = row % g.M, bi = row / g.M;
    const T* pa = a + bi * g.a_strides[0] + i * g.a_strides[1];
    const T* pb = b + bi * g.b_strides[0] + j * g.b_strides[2];
    int64_t s = 0;
    for (int64_t k = 0; k < g.K; ++k) s += int64_t(pa[k * g.a_strides[2]]) * int64_t(pb[k * g.b_strides[1]]);
    out[e] = T(s);
  }
}

}  // namespace

void launch_int_gemm(DType t, const IntGemmArgs& g) {
  const int64_t total = g.batch * g.M * g.N;
  if (total == 0) return;
  switch (t) {
    case DType::I64: launch_kernel(int_gemm_kernel<int64_t>, grid_for(total), kThreads, g); break;
    case DType::I32: launch_kernel(int_gemm_kernel<int32_t>, grid_for(total), kThreads, g); break;
    case DType::U8: launch_kernel(int_gemm_kernel<uint8_t>, grid_for(total), kThreads, g); break;
    default: throw_dtype_unsupported("mm (integer kernel)", t);
  }
  TR_CUDA_CHECK_LAUNCH("int_gemm_kernel");
}

}  // namespace tr::cuda
