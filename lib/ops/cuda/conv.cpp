// CUDA launchers of conv2d, conv2d_backward_input and conv2d_backward_weight through cuDNN's
// convolution API (cudnnConvolutionForward / BackwardData / BackwardFilter), NCHW, contiguous
// operands. The algorithm is cuDNN's heuristic first choice, or with backends::cudnn().benchmark
// the fastest measured one (cudnnFind*, once per geometry), and with .deterministic only
// algorithms cuDNN marks deterministic. f16/bf16 compute in f32; f32 in TF32
// only when backends::cudnn().allow_tf32.
//
// cuDNN 9 marks this API deprecated in favour of its graph API; it is still shipped, documented
// and what the three ops need, so the deprecation warnings are silenced in this file alone.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <map>
#include <mutex>
#include <tuple>
#include <vector>
#include "ops/backends.h"
#include "ops/cuda/library_check.h"
#include "ops/cuda/tensor_args.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::cuda {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

cudnnHandle_t cudnn_handle(int device) {
  return per_device_handle<cudnnHandle_t>(device, [] {
    cudnnHandle_t h = nullptr;
    TR_CUDNN_CHECK(cudnnCreate(&h));
    return h;
  });
}

cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::F16: return CUDNN_DATA_HALF;
    case DType::BF16: return CUDNN_DATA_BFLOAT16;
    case DType::F32: return CUDNN_DATA_FLOAT;
    case DType::F64: return CUDNN_DATA_DOUBLE;
    default: throw_dtype_unsupported("conv2d (cuDNN)", t);
  }
}

int cudnn_int(int64_t v) {
  TR_CHECK(v >= 0 && v <= INT32_MAX, "conv2d on CUDA: size ", v, " exceeds cuDNN's 32-bit range");
  return int(v);
}

// The descriptors of one convolution x [N, C, H, W] * w [O, C/g, KH, KW] -> y [N, O, OH, OW].
class ConvDescriptors {
 public:
  ConvDescriptors(const Shape& x, const Shape& w, const Shape& y, DType t, const Attrs& a) {
    const cudnnDataType_t dt = cudnn_type(t);
    TR_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_));
    TR_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_));
    TR_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_));
    TR_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_));
    TR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NCHW, dt, cudnn_int(x[0]), cudnn_int(x[1]),
                                              cudnn_int(x[2]), cudnn_int(x[3])));
    TR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_, CUDNN_TENSOR_NCHW, dt, cudnn_int(y[0]), cudnn_int(y[1]),
                                              cudnn_int(y[2]), cudnn_int(y[3])));
    TR_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_, dt, CUDNN_TENSOR_NCHW, cudnn_int(w[0]), cudnn_int(w[1]),
                                              cudnn_int(w[2]), cudnn_int(w[3])));
    const Pair &s = a.ints("stride"), &p = a.ints("padding"), &d = a.ints("dilation");
    // f16/bf16 accumulate in f32 (the CPU widens to f32 too); f64 stays f64
    const cudnnDataType_t compute = t == DType::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    TR_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_, cudnn_int(p[0]), cudnn_int(p[1]), cudnn_int(s[0]),
                                                   cudnn_int(s[1]), cudnn_int(d[0]), cudnn_int(d[1]),
                                                   CUDNN_CROSS_CORRELATION, compute));
    TR_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_, cudnn_int(a.i("groups"))));
    // f32: FMA only unless TF32 is allowed; f16/bf16 always on tensor cores
    const bool f32_exact = t == DType::F32 && !backends::cudnn().allow_tf32;
    TR_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_, f32_exact ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH));
    key_ = {x, w, y, int(t), a.ints("stride"), a.ints("padding"), a.ints("dilation"), a.i("groups"), f32_exact};
  }
  ~ConvDescriptors() {
    cudnnDestroyTensorDescriptor(x_);
    cudnnDestroyTensorDescriptor(y_);
    cudnnDestroyFilterDescriptor(w_);
    cudnnDestroyConvolutionDescriptor(conv_);
  }
  ConvDescriptors(const ConvDescriptors&) = delete;
  ConvDescriptors& operator=(const ConvDescriptors&) = delete;

  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  // what an algorithm choice depends on
  std::tuple<Shape, Shape, Shape, int, Shape, Shape, Shape, int64_t, bool> key_;
};

// The first usable algorithm of `perf` (sorted best first by cuDNN): status success, within the
// deterministic set when asked for.
template <typename Perf> Perf pick(const std::vector<Perf>& perf, int n, const char* op) {
  for (int i = 0; i < n; ++i) {
    const Perf& p = perf[size_t(i)];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    if (backends::cudnn().deterministic && p.determinism != CUDNN_DETERMINISTIC) continue;
    return p;
  }
  throw Error(str(op, ": cuDNN offers no ", backends::cudnn().deterministic ? "deterministic " : "",
                  "algorithm for this convolution"));
}

// The three directions' cuDNN entry points, as one interface for choose() below. Each
// direction's operands: forward (x, w) -> y; backward data (w, dy) -> dx; backward filter (x, dy) -> dw.
struct Forward {
  using Algo = cudnnConvolutionFwdAlgo_t;
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static constexpr int kCount = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  static constexpr const char* kOp = "conv2d";
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescriptors& d, Algo a, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, d.x_, d.w_, d.conv_, d.y_, a, bytes);
  }
  static cudnnStatus_t heuristics(cudnnHandle_t h, const ConvDescriptors& d, int n, int* got, Perf* perf) {
    return cudnnGetConvolutionForwardAlgorithm_v7(h, d.x_, d.w_, d.conv_, d.y_, n, got, perf);
  }
  static cudnnStatus_t find(cudnnHandle_t h, const ConvDescriptors& d, const void* x, const void* w, void* y, int n,
                            int* got, Perf* perf, void* ws, size_t bytes) {
    return cudnnFindConvolutionForwardAlgorithmEx(h, d.x_, x, d.w_, w, d.conv_, d.y_, y, n, got, perf, ws, bytes);
  }
};
struct BackwardData {
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static constexpr int kCount = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  static constexpr const char* kOp = "conv2d_backward_input";
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescriptors& d, Algo a, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w_, d.y_, d.conv_, d.x_, a, bytes);
  }
  static cudnnStatus_t heuristics(cudnnHandle_t h, const ConvDescriptors& d, int n, int* got, Perf* perf) {
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w_, d.y_, d.conv_, d.x_, n, got, perf);
  }
  static cudnnStatus_t find(cudnnHandle_t h, const ConvDescriptors& d, const void* w, const void* dy, void* dx, int n,
                            int* got, Perf* perf, void* ws, size_t bytes) {
    return cudnnFindConvolutionBackwardDataAlgorithmEx(h, d.w_, w, d.y_, dy, d.conv_, d.x_, dx, n, got, perf, ws,
                                                       bytes);
  }
};
struct BackwardFilter {
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  static constexpr int kCount = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  static constexpr const char* kOp = "conv2d_backward_weight";
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescriptors& d, Algo a, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x_, d.y_, d.conv_, d.w_, a, bytes);
  }
  static cudnnStatus_t heuristics(cudnnHandle_t h, const ConvDescriptors& d, int n, int* got, Perf* perf) {
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x_, d.y_, d.conv_, d.w_, n, got, perf);
  }
  static cudnnStatus_t find(cudnnHandle_t h, const ConvDescriptors& d, const void* x, const void* dy, void* dw, int n,
                            int* got, Perf* perf, void* ws, size_t bytes) {
    return cudnnFindConvolutionBackwardFilterAlgorithmEx(h, d.x_, x, d.y_, dy, d.conv_, d.w_, dw, n, got, perf, ws,
                                                         bytes);
  }
};

// The algorithm of direction Dir for this geometry and its workspace bytes, chosen once per
// (geometry, device, benchmark, deterministic): cuDNN's heuristic first choice that qualifies, or
// with benchmark the fastest that cudnnFind* measures (on the call's own operands: the output is
// overwritten by every trial and computed again by the caller).
template <typename Dir> std::pair<typename Dir::Algo, size_t> choose(cudnnHandle_t h, const ConvDescriptors& d,
                                                                     const void* a, const void* b, void* out,
                                                                     Device dev) {
  using Key = std::tuple<decltype(ConvDescriptors::key_), int, bool, bool>;
  static std::mutex mu;
  static std::map<Key, std::pair<typename Dir::Algo, size_t>> cache;
  const auto& be = backends::cudnn();
  const Key key{d.key_, dev.index, be.benchmark, be.deterministic};
  {
    std::lock_guard<std::mutex> g(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  std::vector<typename Dir::Perf> perf(Dir::kCount);
  int n = 0;
  if (be.benchmark) {
    size_t ws_bytes = 0;
    for (int i = 0; i < Dir::kCount; ++i) {
      size_t bytes = 0;
      if (Dir::workspace(h, d, typename Dir::Algo(i), &bytes) == CUDNN_STATUS_SUCCESS)
        ws_bytes = std::max(ws_bytes, bytes);
    }
    Tensor ws = workspace(ws_bytes, dev);
    TR_CUDNN_CHECK(Dir::find(h, d, a, b, out, int(perf.size()), &n, perf.data(), ws.raw_data(), ws_bytes));
  } else {
    TR_CUDNN_CHECK(Dir::heuristics(h, d, int(perf.size()), &n, perf.data()));
  }
  const auto p = pick(perf, n, Dir::kOp);
  size_t bytes = 0;
  TR_CUDNN_CHECK(Dir::workspace(h, d, p.algo, &bytes));
  std::lock_guard<std::mutex> g(mu);
  return cache[key] = {p.algo, bytes};
}

// alpha / beta in the type cuDNN wants: double for f64 data, float otherwise
struct Scale {
  double d;
  float f;
  const void* ptr(DType t) const { return t == DType::F64 ? static_cast<const void*>(&d) : &f; }
};
constexpr Scale kOne{1.0, 1.0f}, kZero{0.0, 0.0f};

// y = conv(x, w) (+ b[o])
void conv2d_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard guard(out[0]);
  const Tensor x = in[0].contiguous(), w = in[1].contiguous();
  const Tensor& y = out[0];
  const DType t = x.dtype();
  cudnnHandle_t h = cudnn_handle(y.device().index);
  ConvDescriptors d(x.sizes(), w.sizes(), y.sizes(), t, a);
  auto [algo, bytes] = choose<Forward>(h, d, x.raw_data(), w.raw_data(), y.raw_data(), y.device());
  Tensor ws = workspace(bytes, y.device());
  TR_CUDNN_CHECK(cudnnConvolutionForward(h, kOne.ptr(t), d.x_, x.raw_data(), d.w_, w.raw_data(), d.conv_, algo,
                                         ws.raw_data(), bytes, kZero.ptr(t), d.y_, y.raw_data()));
  if (in.size() == 3) {
    const Tensor b = in[2].contiguous();
    cudnnTensorDescriptor_t bd = nullptr;
    TR_CUDNN_CHECK(cudnnCreateTensorDescriptor(&bd));
    cudnnStatus_t st = cudnnSetTensor4dDescriptor(bd, CUDNN_TENSOR_NCHW, cudnn_type(t), 1, cudnn_int(b.numel()), 1, 1);
    if (st == CUDNN_STATUS_SUCCESS)
      st = cudnnAddTensor(h, kOne.ptr(t), bd, b.raw_data(), kOne.ptr(t), d.y_, y.raw_data());
    cudnnDestroyTensorDescriptor(bd);
    TR_CUDNN_CHECK(st);
  }
}
TR_REGISTER_KERNEL(conv2d, CUDA, conv2d_cuda);

// gx = the adjoint of x -> conv(x, w) applied to gy
void conv2d_backward_input_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard guard(out[0]);
  const Tensor gy = in[0].contiguous(), w = in[1].contiguous();
  const Tensor& gx = out[0];
  const DType t = gy.dtype();
  cudnnHandle_t h = cudnn_handle(gx.device().index);
  ConvDescriptors d(gx.sizes(), w.sizes(), gy.sizes(), t, a);
  auto [algo, bytes] = choose<BackwardData>(h, d, w.raw_data(), gy.raw_data(), gx.raw_data(), gx.device());
  Tensor ws = workspace(bytes, gx.device());
  TR_CUDNN_CHECK(cudnnConvolutionBackwardData(h, kOne.ptr(t), d.w_, w.raw_data(), d.y_, gy.raw_data(), d.conv_, algo,
                                              ws.raw_data(), bytes, kZero.ptr(t), d.x_, gx.raw_data()));
}
TR_REGISTER_KERNEL(conv2d_backward_input, CUDA, conv2d_backward_input_cuda);

// gw = the adjoint of w -> conv(x, w) applied to gy (and gb, with a second output)
void conv2d_backward_weight_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard guard(out[0]);
  const Tensor gy = in[0].contiguous(), x = in[1].contiguous();
  const Tensor& gw = out[0];
  const DType t = gy.dtype();
  cudnnHandle_t h = cudnn_handle(gw.device().index);
  ConvDescriptors d(x.sizes(), gw.sizes(), gy.sizes(), t, a);
  auto [algo, bytes] = choose<BackwardFilter>(h, d, x.raw_data(), gy.raw_data(), gw.raw_data(), gw.device());
  Tensor ws = workspace(bytes, gw.device());
  TR_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, kOne.ptr(t), d.x_, x.raw_data(), d.y_, gy.raw_data(), d.conv_, algo,
                                                ws.raw_data(), bytes, kZero.ptr(t), d.w_, gw.raw_data()));
  // the bias gradient, as torch on CUDA: gy summed over N, OH, OW apart from cuDNN
  if (out.size() == 2) out[1].detach().copy_(sum(gy.detach(), {0, 2, 3}));
}
TR_REGISTER_KERNEL(conv2d_backward_weight, CUDA, conv2d_backward_weight_cuda);

}  // namespace

}  // namespace tr::cuda
