// CUDA launchers of batch_norm, batch_norm_backward, batch_norm_elemt and the fused batch norm +
// relu + max pool with its backward on contiguous operands (ops/cuda/batch_norm_kernels.cu);
// per-channel coefficients live in a scratch workspace.
#include "ops/cuda/tensor_args.h"
#include "ops/ops.h"
#include "ops/pool_geom.h"
#include "ops/registry.h"

namespace tr::cuda {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

BatchNormGeom geom_of(const Tensor& x, const Attrs& a) {
  int64_t L = 1;
  for (int64_t d = 2; d < x.dim(); ++d) L *= x.size(d);
  return {x.size(0), x.size(1), L, a.f("eps")};
}

double* coef_ptr(const Tensor& ws) { return static_cast<double*>(ws.raw_data()); }

void batch_norm_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard guard(out[0]);
  const Tensor x = in[0].contiguous(), w = in[1].contiguous(), b = in[2].contiguous();
  const BatchNormGeom g = geom_of(x, a);
  Tensor ws = workspace(size_t(2 * g.C) * sizeof(double), x.device());
  launch_batch_norm(x.dtype(), g, x.raw_data(), w.raw_data(), b.raw_data(), out[0].raw_data(), out[1].raw_data(),
                    out[2].raw_data(), coef_ptr(ws));
}
TR_REGISTER_KERNEL(batch_norm, CUDA, batch_norm_cuda);

void batch_norm_backward_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard guard(out[0]);
  const Tensor gy = in[0].contiguous(), x = in[1].contiguous(), w = in[2].contiguous(), m = in[3].contiguous(),
               v = in[4].contiguous();
  const BatchNormGeom g = geom_of(x, a);
  Tensor ws = workspace(size_t(4 * g.C) * sizeof(double), x.device());
  launch_batch_norm_backward(x.dtype(), g, gy.raw_data(), x.raw_data(), w.raw_data(), m.raw_data(), v.raw_data(),
                             out[0].raw_data(), out[1].raw_data(), out[2].raw_data(), coef_ptr(ws));
}
TR_REGISTER_KERNEL(batch_norm_backward, CUDA, batch_norm_backward_cuda);

void batch_norm_elemt_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard guard(out[0]);
  const Tensor x = in[0].contiguous(), w = in[1].contiguous(), b = in[2].contiguous(), m = in[3].contiguous(),
               v = in[4].contiguous();
  const BatchNormGeom g = geom_of(x, a);
  Tensor ws = workspace(size_t(2 * g.C) * sizeof(double), x.device());
  launch_batch_norm_elemt(x.dtype(), g, x.raw_data(), w.raw_data(), b.raw_data(), m.raw_data(), v.raw_data(),
                          out[0].raw_data(), coef_ptr(ws));
}
TR_REGISTER_KERNEL(batch_norm_elemt, CUDA, batch_norm_elemt_cuda);

void batch_norm_relu_max_pool2d_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard guard(out[0]);
  const Tensor x = in[0].contiguous(), w = in[1].contiguous(), b = in[2].contiguous();
  const BatchNormGeom g = geom_of(x, a);
  Tensor ws = workspace(size_t(2 * g.C) * sizeof(double), x.device());
  launch_batch_norm_relu_max_pool2d(x.dtype(), g, pool_geom(x.sizes(), out[0].sizes(), a), x.raw_data(), w.raw_data(),
                                    b.raw_data(), out[0].raw_data(), out[1].data_ptr<int64_t>(), out[2].raw_data(),
                                    out[3].raw_data(), coef_ptr(ws));
}
TR_REGISTER_KERNEL(batch_norm_relu_max_pool2d, CUDA, batch_norm_relu_max_pool2d_cuda);

// The gradient below the pool is gathered from the windows over each position, as
// max_pool2d_backward's CUDA kernel: an index that no window over it names is not seen.
void batch_norm_relu_max_pool2d_backward_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard guard(out[0]);
  const Tensor gy = in[0].contiguous(), x = in[1].contiguous(), w = in[2].contiguous(), m = in[3].contiguous(),
               v = in[4].contiguous(), y = in[5].contiguous(), idx = in[6].contiguous();
  const BatchNormGeom g = geom_of(x, a);
  Tensor ws = workspace(size_t(4 * g.C) * sizeof(double), x.device());
  launch_batch_norm_relu_max_pool2d_backward(x.dtype(), g, pool_geom(x.sizes(), gy.sizes(), a), gy.raw_data(),
                                             x.raw_data(), w.raw_data(), m.raw_data(), v.raw_data(), y.raw_data(),
                                             idx.data_ptr<int64_t>(), out[0].raw_data(), out[1].raw_data(),
                                             out[2].raw_data(), coef_ptr(ws));
}
TR_REGISTER_KERNEL(batch_norm_relu_max_pool2d_backward, CUDA, batch_norm_relu_max_pool2d_backward_cuda);

}  // namespace

}  // namespace tr::cuda
