// CUDA kernels of native_layer_norm, _add_native_layer_norm and their backward over rows [R, N]:
// one warp per row sums its statistics in double (mean, then squared deviations, as the CPU
// kernel) and writes the row with ops/layer_norm_math.h (y and gy in the rows' or a low dtype); the weight and bias
// gradients sum over rows in two passes (blocks of kLayerNormRowsPerPartial rows, then the blocks in order), so no
// atomics and a fixed order.
#include "ops/cuda/loops.cuh"
#include "ops/layer_norm_math.h"

namespace tr::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// the stats type: float for f16 / bf16 / f32 rows, double for f64
template <typename T> using stat_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// y = norm(v) of type Y per row, v = x (h null) or s = x + h written to s (the residual add fused in)
template <typename T, typename Y, typename H>
__global__ void layer_norm_kernel(int64_t R, int64_t N, double eps, const T* x, const H* h, T* s, const T* w,
                                  const T* b, Y* y, stat_t<T>* mean_out, stat_t<T>* rstd_out) {
  using A = acc_t<T>;
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= R) return;
  const T* xr = x + r * N;
  if (h) {  // each lane reads back below only the values it wrote here
    const H* hr = h + r * N;
    T* sr = s + r * N;
    for (int64_t j = lane; j < N; j += 32) sr[j] = ln::residual_add(xr[j], hr[j]);
    xr = sr;
  }
  double sum = 0;
  for (int64_t j = lane; j < N; j += 32) sum += double(A(xr[j]));
  const double mean = warp_sum(sum) / double(N);
  double q = 0;
  for (int64_t j = lane; j < N; j += 32) {
    const double d = double(A(xr[j])) - mean;
    q += d * d;
  }
  const double rstd = ln::rstd_of(warp_sum(q) / double(N), eps);
  if (lane == 0) {
    mean_out[r] = stat_t<T>(mean);
    rstd_out[r] = stat_t<T>(rstd);
  }
  const A m = A(stat_t<T>(mean)), rs = A(stat_t<T>(rstd));
  Y* yr = y + r * N;
  for (int64_t j = lane; j < N; j += 32) yr[j] = Y(T(ln::normalize(A(xr[j]), m, rs, A(w[j]), A(b[j]))));
}

// gx = gs + d(norm)/dx of type T (gs null: 0), and gh = gx rounded to G where asked
template <typename T, typename G>
__global__ void layer_norm_grad_input_kernel(int64_t R, int64_t N, const G* gy, const T* x, const T* w,
                                             const stat_t<T>* mean, const stat_t<T>* rstd, const T* gs, T* gx, G* gh) {
  using A = acc_t<T>;
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= R) return;
  const G* gr = gy + r * N;
  const T* xr = x + r * N;
  const A m = A(mean[r]), rs = A(rstd[r]);
  double sg = 0, sgx = 0;
  for (int64_t j = lane; j < N; j += 32) {
    const double g = double(A(gr[j]) * A(w[j]));
    sg += g;
    sgx += g * double((A(xr[j]) - m) * rs);
  }
  const A a = A(warp_sum(sg) / double(N)), c = A(warp_sum(sgx) / double(N));
  const int64_t o = r * N;
  for (int64_t j = lane; j < N; j += 32) {
    T v = T(ln::grad_input(A(gr[j]), A(xr[j]), A(w[j]), m, rs, a, c));
    if (gs) v = T(A(gs[o + j]) + A(v));
    gx[o + j] = v;
    if (gh) gh[o + j] = G(A(v));
  }
}

// partial[p][j] = S over rows [p P, (p + 1) P) of gy xhat, and partial[chunks + p][j] of gy
template <typename T, typename G>
__global__ void layer_norm_grad_partial_kernel(int64_t R, int64_t N, const G* gy, const T* x, const stat_t<T>* mean,
                                               const stat_t<T>* rstd, double* partial, int64_t chunks) {
  using A = acc_t<T>;
  const int64_t p = blockIdx.y;
  const int64_t r0 = p * kLayerNormRowsPerPartial,
                r1 = r0 + kLayerNormRowsPerPartial < R ? r0 + kLayerNormRowsPerPartial : R;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < N; j += int64_t(blockDim.x) * gridDim.x) {
    double sw = 0, sb = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const A g = A(gy[r * N + j]);
      sw += double(g * ((A(x[r * N + j]) - A(mean[r])) * A(rstd[r])));
      sb += double(g);
    }
    partial[p * N + j] = sw;
    partial[(chunks + p) * N + j] = sb;
  }
}

template <typename T>
__global__ void layer_norm_grad_sum_kernel(int64_t N, const double* partial, int64_t chunks, T* gw, T* gb) {
  using A = acc_t<T>;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < N; j += int64_t(blockDim.x) * gridDim.x) {
    double sw = 0, sb = 0;
    for (int64_t p = 0; p < chunks; ++p) {
      sw += partial[p * N + j];
      sb += partial[(chunks + p) * N + j];
    }
    gw[j] = T(A(sw));
    gb[j] = T(A(sb));
  }
}

}  // namespace

void launch_layer_norm(const LayerNormArgs& a) {
  if (a.R == 0) return;
  const unsigned blocks = unsigned((a.R + kWarpsPerBlock - 1) / kWarpsPerBlock);
  ln::dispatch_rows(a.t, a.yt, "native_layer_norm", [&](auto rows, auto low) {
    using T = typename decltype(rows)::type;
    using L = typename decltype(low)::type;
    const T *x = static_cast<const T*>(a.x), *w = static_cast<const T*>(a.w), *b = static_cast<const T*>(a.b);
    T* s = static_cast<T*>(a.s);
    L* y = static_cast<L*>(a.y);
    auto* mean = static_cast<stat_t<T>*>(a.mean);
    auto* rstd = static_cast<stat_t<T>*>(a.rstd);
    if (a.h && a.ht != a.t) {
      TR_CHECK(a.ht == a.yt, "_add_native_layer_norm: h of ", dtype_name(a.ht), " beside ", dtype_name(a.t),
               " rows and a ", dtype_name(a.yt), " result");
      launch_kernel(layer_norm_kernel<T, L, L>, blocks, 32 * kWarpsPerBlock, a.R, a.N, a.eps, x,
                    static_cast<const L*>(a.h), s, w, b, y, mean, rstd);
    } else {
      launch_kernel(layer_norm_kernel<T, L, T>, blocks, 32 * kWarpsPerBlock, a.R, a.N, a.eps, x,
                    static_cast<const T*>(a.h), s, w, b, y, mean, rstd);
    }
    TR_CUDA_CHECK_LAUNCH("layer_norm_kernel");
  });
}

void launch_layer_norm_backward(const LayerNormBackwardArgs& a) {
  if (a.N == 0) return;
  const int64_t chunks = (a.R + kLayerNormRowsPerPartial - 1) / kLayerNormRowsPerPartial;
  ln::dispatch_rows(a.t, a.gt, "native_layer_norm_backward", [&](auto rows, auto low) {
    using T = typename decltype(rows)::type;
    using G = typename decltype(low)::type;
    using S = stat_t<T>;
    const G* gy = static_cast<const G*>(a.gy);
    const T* x = static_cast<const T*>(a.x);
    const S *pm = static_cast<const S*>(a.mean), *pr = static_cast<const S*>(a.rstd);
    if (a.R > 0) {
      const unsigned blocks = unsigned((a.R + kWarpsPerBlock - 1) / kWarpsPerBlock);
      launch_kernel(layer_norm_grad_input_kernel<T, G>, blocks, 32 * kWarpsPerBlock, a.R, a.N, gy, x,
                    static_cast<const T*>(a.w), pm, pr, static_cast<const T*>(a.gs), static_cast<T*>(a.gx),
                    static_cast<G*>(a.gh));
      TR_CUDA_CHECK_LAUNCH("layer_norm_grad_input_kernel");
      const dim3 grid(unsigned(std::min<int64_t>((a.N + kThreads - 1) / kThreads, 65535)), unsigned(chunks));
      launch_kernel(layer_norm_grad_partial_kernel<T, G>, grid, kThreads, a.R, a.N, gy, x, pm, pr, a.partial, chunks);
      TR_CUDA_CHECK_LAUNCH("layer_norm_grad_partial_kernel");
    }
    launch_kernel(layer_norm_grad_sum_kernel<T>, grid_for(a.N), kThreads, a.N, a.partial, chunks, static_cast<T*>(a.gw),
                  static_cast<T*>(a.gb));
    TR_CUDA_CHECK_LAUNCH("layer_norm_grad_sum_kernel");
  });
}

}  // namespace tr::cuda
