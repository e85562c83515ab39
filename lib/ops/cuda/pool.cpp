// CUDA launchers of max_pool2d, max_pool2d_backward, avg_pool2d and avg_pool2d_backward on
// contiguous NCHW planes (ops/cuda/pool_kernels.cu). Own kernels rather than cuDNN's pooling:
// max_pool2d returns torch's flat argmax indices, which cuDNN does not produce.
#include "ops/cuda/tensor_args.h"
#include "ops/deferred_check.h"
#include "ops/ops.h"
#include "ops/pool_geom.h"
#include "ops/registry.h"

namespace tr::cuda {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

void max_pool2d_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard guard(out[0]);
  const Tensor x = in[0].contiguous();
  launch_max_pool2d(x.dtype(), pool_geom(x.sizes(), out[0].sizes(), a), x.raw_data(), out[0].raw_data(),
                    out[1].data_ptr<int64_t>());
}
TR_REGISTER_KERNEL(max_pool2d, CUDA, max_pool2d_cuda);

// gx = the adjoint of max_pool2d. With the window attrs (what max_pool2d's backward passes) each
// input gathers from the windows over it, as torch's CUDA kernel does: an index that no window
// over it could produce is not seen. Without them, plane-serial scatter with the CPU's checks.
void max_pool2d_backward_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard guard(out[0]);
  const Tensor gy = in[0].contiguous(), idx = in[1].contiguous();
  const Tensor& gx = out[0];
  const bool windows = a.has("kernel");
  pool::Geom g =
      windows ? pool_geom(gx.sizes(), gy.sizes(), a)
              : pool::Geom{gx.size(0) * gx.size(1), gx.size(2), gx.size(3), gy.size(2), gy.size(3), 1, 1, 1, 1, 0, 0};
  Tensor err = windows ? Tensor() : error_word(gx.device());  // only the scatter checks indices
  launch_max_pool2d_backward(gy.dtype(), g, windows, gy.raw_data(), idx.data_ptr<int64_t>(), gx.raw_data(),
                             windows ? nullptr : static_cast<unsigned long long*>(err.raw_data()));
  if (!windows)
    check_on_sync(err, -1, [H = g.H, W = g.W](int64_t) {
      throw Error(str("max_pool2d_backward: an index is outside the ", H, " x ", W,
                      " input plane (found by the CUDA kernel, raised at the next wait for the device)"));
    });
}
TR_REGISTER_KERNEL(max_pool2d_backward, CUDA, max_pool2d_backward_cuda);

void avg_pool2d_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard guard(out[0]);
  const Tensor x = in[0].contiguous();
  launch_avg_pool2d(x.dtype(), pool_geom(x.sizes(), out[0].sizes(), a), a.b("count_include_pad"), x.raw_data(),
                    out[0].raw_data());
}
TR_REGISTER_KERNEL(avg_pool2d, CUDA, avg_pool2d_cuda);

void avg_pool2d_backward_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard guard(out[0]);
  const Tensor gy = in[0].contiguous();
  launch_avg_pool2d_backward(gy.dtype(), pool_geom(out[0].sizes(), gy.sizes(), a), a.b("count_include_pad"),
                             gy.raw_data(), out[0].raw_data());
}
TR_REGISTER_KERNEL(avg_pool2d_backward, CUDA, avg_pool2d_backward_cuda);

}  // namespace

}  // namespace tr::cuda
