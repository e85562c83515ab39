// CUDA reduction kernels: out[o] = reduce_k map(x[o, k]) over a strided [M outputs, K elements]
// geometry. A block is a 2-D tile of (output lanes x reduction lanes) combined through shared
// memory; when there are few outputs, K is split across blocks and a second kernel combines the
// partial results in a fixed order (deterministic for a given device).
#include <mutex>
#include "ops/cuda/loops.cuh"

namespace tr::cuda {

namespace {

// sum: accumulated in double (floats) or int64 (integers and bool), as the CPU kernel.
template <typename In> struct SumOp {
  using A = acc_t<In>;
  using Acc = std::conditional_t<std::is_floating_point_v<A>, double, int64_t>;
  using Out = std::conditional_t<std::is_floating_point_v<A>, In, int64_t>;
  Out* out;
  __device__ Acc identity() const { return Acc(0); }
  __device__ Acc map(In x, int64_t, int64_t) const { return Acc(A(x)); }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  __device__ void write(int64_t o, Acc s) const { out[o] = convert<Out>(s); }
};

// max / min with the first index attaining it; NaN wins (the first NaN). The order is total,
// so the result does not depend on how the reduction is split: it equals the CPU's serial scan.
template <typename A> struct ValueIndex {
  A val;
  int64_t idx;  // -1: empty
};
template <typename In> struct ExtremumOp {
  using A = acc_t<In>;
  using Acc = ValueIndex<A>;
  bool is_max;
  In* values;
  int64_t* indices;
  __device__ Acc identity() const { return Acc{A(0), -1}; }
  __device__ Acc map(In x, int64_t r, int64_t) const { return Acc{A(x), r}; }
  __device__ Acc combine(Acc a, Acc b) const {
    if (a.idx < 0) return b;
    if (b.idx < 0) return a;
    bool an = a.val != a.val, bn = b.val != b.val;
    if (an || bn) {
      if (an && bn) return a.idx < b.idx ? a : b;
      return an ? a : b;
    }
    if (a.val == b.val) return a.idx < b.idx ? a : b;
    return (is_max ? a.val > b.val : a.val < b.val) ? a : b;
  }
  __device__ void write(int64_t o, Acc s) const {
    if (values) values[o] = In(s.val);
    if (indices) indices[o] = s.idx;
  }
};

// var, pass 1: mean[o] = sum x / K in double.
template <typename In> struct VarMeanOp {
  using A = acc_t<In>;
  using Acc = double;
  double* mean;
  int64_t K;
  __device__ Acc identity() const { return 0.0; }
  __device__ Acc map(In x, int64_t, int64_t) const { return double(A(x)); }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  __device__ void write(int64_t o, Acc s) const { mean[o] = s / double(K); }
};

// var, pass 2: out[o] = sum (x - mean[o])^2 / max(0, K - correction).
template <typename In> struct VarOp {
  using A = acc_t<In>;
  using Acc = double;
  const double* mean;
  In* out;
  double denom;
  __device__ Acc identity() const { return 0.0; }
  __device__ Acc map(In x, int64_t, int64_t o) const {
    double d = double(A(x)) - mean[o];
    return d * d;
  }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  __device__ void write(int64_t o, Acc s) const { out[o] = In(A(s / denom)); }
};

// Block: blockDim.x * blockDim.y <= 256 threads. red_inner: x walks K, y walks outputs;
// else x walks outputs (coalesced when the kept dims are innermost), y walks K.
// blockIdx.y is the split of K this block reduces; with gridDim.y > 1 partials go to `partial`.
template <typename In, typename Op> __global__ void reduce_kernel(ReduceArgs a, Op op, typename Op::Acc* partial) {
  using Acc = typename Op::Acc;
  __shared__ __align__(16) unsigned char smem[kThreads * sizeof(Acc)];
  Acc* buf = reinterpret_cast<Acc*>(smem);
  const int tx = threadIdx.x, ty = threadIdx.y, me = ty * blockDim.x + tx;
  const int out_lane = a.red_inner ? ty : tx, red_lane = a.red_inner ? tx : ty;
  const int n_out = a.red_inner ? blockDim.y : blockDim.x, n_red = a.red_inner ? blockDim.x : blockDim.y;
  const int red_step = a.red_inner ? 1 : blockDim.x;  // buf distance between neighbouring reduction lanes
  const int64_t split = blockIdx.y, splits = gridDim.y;
  const In* in = static_cast<const In*>(a.in);
  for (int64_t tile = blockIdx.x; tile * n_out < a.M; tile += gridDim.x) {
    const int64_t o = tile * n_out + out_lane;
    Acc acc = op.identity();
    if (o < a.M) {
      const int64_t base = strided_offset<kMaxDims>(o, a.out_ndim, a.out_sizes, a.out_strides);
      for (int64_t r = red_lane + split * n_red; r < a.K; r += n_red * splits) {
        const int64_t off = a.red_ndim ? strided_offset<kMaxDims>(r, a.red_ndim, a.red_sizes, a.red_strides) : 0;
        acc = op.combine(acc, op.map(in[base + off], r, o));
      }
    }
    buf[me] = acc;
    __syncthreads();
    for (int s = n_red / 2; s > 0; s >>= 1) {
      if (red_lane < s) buf[me] = op.combine(buf[me], buf[me + s * red_step]);
      __syncthreads();
    }
    if (red_lane == 0 && o < a.M) {
      if (splits == 1)
        op.write(o, buf[me]);
      else
        partial[split * a.M + o] = buf[me];
    }
    __syncthreads();
  }
}

// out[o] = combine over splits s (in order) of partial[s, o].
template <typename Op>
__global__ void reduce_finalize_kernel(int64_t M, int splits, const typename Op::Acc* partial, Op op) {
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < M; o += int64_t(blockDim.x) * gridDim.x) {
    typename Op::Acc acc = partial[o];
    for (int s = 1; s < splits; ++s) acc = op.combine(acc, partial[s * M + o]);
    op.write(o, acc);
  }
}

int sm_count(int device) {
  static std::mutex mu;
  static int cache[64] = {};
  std::lock_guard<std::mutex> g(mu);
  if (device < 0 || device >= 64) return 80;
  if (!cache[device]) {
    int n = 0;
    TR_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    cache[device] = n > 0 ? n : 1;
  }
  return cache[device];
}

// Block shape of a reduction: (x, y) threads.
dim3 reduce_block(const ReduceArgs& a, int sms) {
  if (a.red_inner) {
    // few outputs and long rows: the whole block on one output
    if (a.M < int64_t(sms) * 8 && a.K >= 1024) return dim3(256, 1);
    return dim3(32, 8);
  }
  return dim3(32, 8);
}

template <typename In, typename Op>
void run_reduce(const ReduceArgs& a, const ReducePlan& plan, void* workspace, const Op& op, int device) {
  using Acc = typename Op::Acc;
  dim3 block = reduce_block(a, sm_count(device));
  const int n_out = a.red_inner ? block.y : block.x;
  const int64_t tiles = (a.M + n_out - 1) / n_out;
  dim3 grid(unsigned(std::min<int64_t>(tiles, int64_t(1) << 20)), unsigned(plan.splits));
  Acc* partial = plan.splits > 1 ? static_cast<Acc*>(workspace) : nullptr;
  launch_kernel(reduce_kernel<In, Op>, grid, block, a, op, partial);
  TR_CUDA_CHECK_LAUNCH("reduce_kernel");
  if (plan.splits > 1) {
    launch_kernel(reduce_finalize_kernel<Op>, grid_for(a.M), kThreads, a.M, plan.splits, partial, op);
    TR_CUDA_CHECK_LAUNCH("reduce_finalize_kernel");
  }
}

template <typename F> void dispatch_reduce(ReduceOp op, DType t, const F& f) {
  if (op == ReduceOp::VarMean || op == ReduceOp::Var) {
    TR_DISPATCH_FLOAT(t, "var", [&] { f(scalar_t{}); });
  } else {
    TR_DISPATCH_ALL(t, op == ReduceOp::Sum ? "sum" : "max/min", [&] { f(scalar_t{}); });
  }
}

template <typename In> size_t acc_size(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return sizeof(typename SumOp<In>::Acc);
    case ReduceOp::Max:
    case ReduceOp::Min: return sizeof(typename ExtremumOp<In>::Acc);
    default: return sizeof(double);
  }
}

}  // namespace

ReducePlan plan_reduce(ReduceOp op, DType t, const ReduceArgs& a, int device) {
  ReducePlan p;
  if (a.M == 0) return p;
  const int sms = sm_count(device);
  dim3 block = reduce_block(a, sms);
  const int n_out = a.red_inner ? block.y : block.x, n_red = a.red_inner ? block.x : block.y;
  const int64_t tiles = (a.M + n_out - 1) / n_out;
  const int64_t target = int64_t(sms) * 4;  // blocks that keep the device busy
  if (tiles < target) {
    // split K so that each thread still reduces >= 32 elements
    int64_t by_work = a.K / (int64_t(n_red) * 32);
    int64_t splits = std::min<int64_t>({target / tiles, by_work, 1024});
    p.splits = int(std::max<int64_t>(1, splits));
  }
  if (p.splits > 1) {
    size_t acc = 0;
    dispatch_reduce(op, t, [&](auto x) { acc = acc_size<decltype(x)>(op); });
    p.workspace_bytes = size_t(p.splits) * size_t(a.M) * acc;
  }
  return p;
}

void launch_reduce(ReduceOp op, DType t, const ReduceArgs& a, const ReducePlan& plan, void* workspace,
                   const ReduceOutputs& out) {
  if (a.M == 0) return;
  int device = 0;
  TR_CUDA_CHECK(cudaGetDevice(&device));
  dispatch_reduce(op, t, [&](auto x) {
    using In = decltype(x);
    switch (op) {
      case ReduceOp::Sum:
        run_reduce<In>(a, plan, workspace, SumOp<In>{static_cast<typename SumOp<In>::Out*>(out.values)}, device);
        break;
      case ReduceOp::Max:
      case ReduceOp::Min:
        run_reduce<In>(a, plan, workspace,
                       ExtremumOp<In>{op == ReduceOp::Max, static_cast<In*>(out.values), out.indices}, device);
        break;
      case ReduceOp::VarMean:
        if constexpr (is_floating(dtype_of<In>::value))
          run_reduce<In>(a, plan, workspace, VarMeanOp<In>{out.mean, a.K}, device);
        break;
      case ReduceOp::Var:
        if constexpr (is_floating(dtype_of<In>::value))
          run_reduce<In>(a, plan, workspace,
                         VarOp<In>{out.mean, static_cast<In*>(out.values), std::max(0.0, double(a.K) - out.correction)},
                         device);
        break;
    }
  });
}

}  // namespace tr::cuda
