// CUDA launchers of native_layer_norm and native_layer_norm_backward on contiguous rows
// (ops/cuda/layer_norm_kernels.cu).
#include "ops/cuda/tensor_args.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::cuda {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

void native_layer_norm_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard guard(out[0]);
  const Tensor x = in[0].contiguous(), w = in[1].contiguous(), b = in[2].contiguous();
  launch_layer_norm(x.dtype(), x.size(0), x.size(1), a.f("eps"), x.raw_data(), w.raw_data(), b.raw_data(),
                    out[0].raw_data(), out[1].raw_data(), out[2].raw_data());
}
TR_REGISTER_KERNEL(native_layer_norm, CUDA, native_layer_norm_cuda);

void native_layer_norm_backward_cuda(const Ins& in, Outs& out, const Attrs&) {
  DeviceGuard guard(out[0]);
  const Tensor gy = in[0].contiguous(), x = in[1].contiguous(), w = in[2].contiguous(), m = in[3].contiguous(),
               rs = in[4].contiguous();
  const int64_t R = x.size(0), N = x.size(1);
  const int64_t chunks = (R + kLayerNormRowsPerPartial - 1) / kLayerNormRowsPerPartial;
  Tensor partial = workspace(size_t(std::max<int64_t>(1, 2 * N * chunks)) * sizeof(double), x.device());
  launch_layer_norm_backward(x.dtype(), R, N, gy.raw_data(), x.raw_data(), w.raw_data(), m.raw_data(), rs.raw_data(),
                             out[0].raw_data(), out[1].raw_data(), out[2].raw_data(),
                             static_cast<double*>(partial.raw_data()));
}
TR_REGISTER_KERNEL(native_layer_norm_backward, CUDA, native_layer_norm_backward_cuda);

}  // namespace

}  // namespace tr::cuda
