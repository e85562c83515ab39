// CUDA launchers of cross_entropy_rows and cross_entropy_rows_backward on contiguous rows
// (ops/cuda/cross_entropy_kernels.cu).
#include "ops/cuda/tensor_args.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::cuda {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

CrossEntropyArgs rows_args(const Tensor& x, const Tensor& t, const Attrs& a) {
  CrossEntropyArgs r;
  r.N = x.size(0);
  r.V = x.size(1);
  r.ignore_index = a.i("ignore_index");
  r.label_smoothing = a.f("label_smoothing");
  r.x = x.raw_data();
  r.t = t.data_ptr<int64_t>();
  return r;
}

void cross_entropy_rows_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard guard(out[0]);
  const Tensor x = in[0].contiguous(), t = in[1].contiguous();
  launch_cross_entropy(x.dtype(), rows_args(x, t, a), out[0].raw_data(), out[1].raw_data(), out[2].data_ptr<bool>());
}
TR_REGISTER_KERNEL(cross_entropy_rows, CUDA, cross_entropy_rows_cuda);

void cross_entropy_rows_backward_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard guard(out[0]);
  const Tensor gl = in[0].contiguous(), gz = in[1].contiguous(), x = in[2].contiguous(), t = in[3].contiguous(),
               lse = in[4].contiguous();
  launch_cross_entropy_backward(x.dtype(), rows_args(x, t, a), gl.raw_data(), gz.raw_data(), lse.raw_data(),
                                out[0].raw_data());
}
TR_REGISTER_KERNEL(cross_entropy_rows_backward, CUDA, cross_entropy_rows_backward_cuda);

}  // namespace

}  // namespace tr::cuda
