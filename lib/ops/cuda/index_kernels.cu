// CUDA kernels of index_select, index_add, gather and scatter_add. Indices are int64; a negative
// index counts from the end; an index out of range is skipped and the smallest position holding
// one is recorded in *error (atomicMin), for the launcher to report as the CPU does.
#include "ops/cuda/loops.cuh"

namespace tr::cuda {

namespace {

// idx in [-bound, bound) -> [0, bound); else -1 after recording `pos`.
__device__ __forceinline__ int64_t checked_index(int64_t v, int64_t bound, int64_t pos, unsigned long long* error) {
  if (v < 0) v += bound;
  if (v < 0 || v >= bound) {
    atomicMin(error, static_cast<unsigned long long>(pos));
    return -1;
  }
  return v;
}

// dst += v with the CPU's rounding per addition (T(A(dst) + A(v))), atomically.
__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(int32_t* p, int32_t v) { atomicAdd(reinterpret_cast<int*>(p), int(v)); }
__device__ __forceinline__ void atomic_add(int64_t* p, int64_t v) {
  // two's complement: unsigned wrap-around addition is signed addition
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}
template <typename H>  // Half, BFloat16: compare-and-swap on the 16-bit word
__device__ __forceinline__ void atomic_add_16(H* p, H v) {
  unsigned short* addr = reinterpret_cast<unsigned short*>(p);
  unsigned short old = *addr, assumed;
  do {
    assumed = old;
    H cur = H::from_bits(assumed);
    H next = H(float(cur) + float(v));
    old = atomicCAS(addr, assumed, next.x);
  } while (assumed != old);
}
__device__ __forceinline__ void atomic_add(Half* p, Half v) { atomic_add_16(p, v); }
__device__ __forceinline__ void atomic_add(BFloat16* p, BFloat16 v) { atomic_add_16(p, v); }
__device__ __forceinline__ void atomic_add(uint8_t* p, uint8_t v) {
  // compare-and-swap on the aligned 32-bit word holding the byte
  const size_t addr = reinterpret_cast<size_t>(p);
  unsigned int* word = reinterpret_cast<unsigned int*>(addr & ~size_t(3));
  const unsigned shift = unsigned(addr & 3) * 8;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    const uint8_t cur = uint8_t((assumed >> shift) & 0xffu);
    const unsigned int next = (assumed & ~(0xffu << shift)) | (unsigned(uint8_t(cur + v)) << shift);
    old = atomicCAS(word, assumed, next);
  } while (assumed != old);
}

// out[o, j, i] = x[o, idx[j], i]; one thread per output element.
template <typename U> __global__ void index_select_kernel(const U* x, U* out, const int64_t* idx, int64_t outer,
                                                          int64_t n, int64_t m, int64_t inner,
                                                          unsigned long long* error) {
  const int64_t total = outer * m * inner;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(blockDim.x) * gridDim.x) {
    const int64_t i = e % inner, row = e / inner, j = row % m, o = row / m;
    const int64_t v = checked_index(idx[j], n, j, error);
    if (v >= 0) out[e] = x[(o * n + v) * inner + i];
  }
}

// out[o, idx[j], i] += src[o, j, i]; one thread per source element.
template <typename T> __global__ void index_add_kernel(T* out, const T* src, const int64_t* idx, int64_t outer,
                                                       int64_t n, int64_t m, int64_t inner, unsigned long long* error) {
  const int64_t total = outer * m * inner;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(blockDim.x) * gridDim.x) {
    const int64_t i = e % inner, row = e / inner, j = row % m, o = row / m;
    const int64_t v = checked_index(idx[j], n, j, error);
    if (v >= 0) atomic_add(out + (o * n + v) * inner + i, src[e]);
  }
}

// Offsets of index position p (row-major over a.sizes) in x (with p[dim] replaced by v) and src.
__device__ __forceinline__ void index_offsets(const IndexArgs& a, int64_t p, int64_t v, int64_t& xo, int64_t& so) {
  xo = 0;
  so = 0;
#pragma unroll
  for (int d = kMaxIndexDims - 1; d >= 0; --d) {
    if (d < a.ndim) {
      const int64_t q = p / a.sizes[d], c = p - q * a.sizes[d];
      p = q;
      xo += (d == a.dim ? v : c) * a.x_strides[d];
      so += c * a.src_strides[d];
    }
  }
}

// out[p] = x[p with p[dim] = idx[p]]
template <typename U>
__global__ void gather_kernel(IndexArgs a, const U* x, U* out, const int64_t* idx, unsigned long long* error) {
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < a.numel; p += int64_t(blockDim.x) * gridDim.x) {
    const int64_t v = checked_index(idx[p], a.bound, p, error);
    if (v < 0) continue;
    int64_t xo, so;
    index_offsets(a, p, v, xo, so);
    out[p] = x[xo];
  }
}

// out[p with p[dim] = idx[p]] += src[p]
template <typename T>
__global__ void scatter_add_kernel(IndexArgs a, T* out, const T* src, const int64_t* idx, unsigned long long* error) {
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < a.numel; p += int64_t(blockDim.x) * gridDim.x) {
    const int64_t v = checked_index(idx[p], a.bound, p, error);
    if (v < 0) continue;
    int64_t oo, so;
    index_offsets(a, p, v, oo, so);
    atomic_add(out + oo, src[so]);
  }
}

template <typename F> void dispatch_size(size_t bytes, const char* name, const F& f) {
  switch (bytes) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    default: throw Error(str(name, ": unsupported element size ", bytes));
  }
}

}  // namespace

void launch_index_select(size_t elem_size, const void* x, void* out, const int64_t* idx, int64_t outer, int64_t n,
                         int64_t m, int64_t inner, unsigned long long* error) {
  const int64_t total = outer * m * inner;
  if (total == 0) return;
  dispatch_size(elem_size, "index_select", [&](auto u) {
    using U = decltype(u);
    launch_kernel(index_select_kernel<U>, grid_for(total), kThreads, static_cast<const U*>(x), static_cast<U*>(out),
                  idx, outer, n, m, inner, error);
    TR_CUDA_CHECK_LAUNCH("index_select_kernel");
  });
}

void launch_index_add(DType t, void* out, const void* src, const int64_t* idx, int64_t outer, int64_t n, int64_t m,
                      int64_t inner, unsigned long long* error) {
  const int64_t total = outer * m * inner;
  if (total == 0) return;
  TR_DISPATCH_NUMERIC(t, "index_add", [&] {
    launch_kernel(index_add_kernel<scalar_t>, grid_for(total), kThreads, static_cast<scalar_t*>(out),
                  static_cast<const scalar_t*>(src), idx, outer, n, m, inner, error);
    TR_CUDA_CHECK_LAUNCH("index_add_kernel");
  });
}

void launch_gather(size_t elem_size, const IndexArgs& a, const void* x, void* out, const int64_t* idx,
                   unsigned long long* error) {
  if (a.numel == 0) return;
  dispatch_size(elem_size, "gather", [&](auto u) {
    using U = decltype(u);
    launch_kernel(gather_kernel<U>, grid_for(a.numel), kThreads, a, static_cast<const U*>(x), static_cast<U*>(out), idx,
                  error);
    TR_CUDA_CHECK_LAUNCH("gather_kernel");
  });
}

void launch_scatter_add(DType t, const IndexArgs& a, void* out, const void* src, const int64_t* idx,
                        unsigned long long* error) {
  if (a.numel == 0) return;
  TR_DISPATCH_NUMERIC(t, "scatter_add", [&] {
    launch_kernel(scatter_add_kernel<scalar_t>, grid_for(a.numel), kThreads, a, static_cast<scalar_t*>(out),
                  static_cast<const scalar_t*>(src), idx, error);
    TR_CUDA_CHECK_LAUNCH("scatter_add_kernel");
  });
}

}  // namespace tr::cuda
