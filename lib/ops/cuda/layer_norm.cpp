// CUDA launchers of native_layer_norm, _add_native_layer_norm and their backward on contiguous
// rows (ops/cuda/layer_norm_kernels.cu).
#include "ops/cuda/tensor_args.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::cuda {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

// out: {y, mean, rstd}, or {s, y, mean, rstd} with h
void layer_norm_rows(const Tensor& x_in, const Tensor& h_in, const Tensor& w_in, const Tensor& b_in, Outs& out,
                     double eps) {
  DeviceGuard guard(out[0]);
  const Tensor x = x_in.contiguous(), w = w_in.contiguous(), b = b_in.contiguous();
  const Tensor h = h_in.defined() ? h_in.contiguous() : Tensor();
  const size_t o = h.defined() ? 1 : 0;
  LayerNormArgs a{x.dtype(),
                  out[o].dtype(),
                  h.defined() ? h.dtype() : x.dtype(),
                  x.size(0),
                  x.size(1),
                  eps,
                  x.raw_data(),
                  h.defined() ? h.raw_data() : nullptr,
                  w.raw_data(),
                  b.raw_data(),
                  h.defined() ? out[0].raw_data() : nullptr,
                  out[o].raw_data(),
                  out[o + 1].raw_data(),
                  out[o + 2].raw_data()};
  launch_layer_norm(a);
}

void native_layer_norm_cuda(const Ins& in, Outs& out, const Attrs& a) {
  layer_norm_rows(in[0], Tensor(), in[1], in[2], out, a.f("eps"));
}
TR_REGISTER_KERNEL(native_layer_norm, CUDA, native_layer_norm_cuda);

void add_native_layer_norm_cuda(const Ins& in, Outs& out, const Attrs& a) {
  layer_norm_rows(in[0], in[1], in[2], in[3], out, a.f("eps"));
}
TR_REGISTER_KERNEL(_add_native_layer_norm, CUDA, add_native_layer_norm_cuda);

// in: gy, x, w, mean, rstd[, gs]; out: gx, gw, gb[, gh]
void layer_norm_backward_rows(const Ins& in, Outs& out) {
  DeviceGuard guard(out[0]);
  const Tensor gy = in[0].contiguous(), x = in[1].contiguous(), w = in[2].contiguous(), m = in[3].contiguous(),
               rs = in[4].contiguous();
  const Tensor gs = in.size() > 5 && in[5].defined() ? in[5].contiguous() : Tensor();
  const int64_t R = x.size(0), N = x.size(1);
  const int64_t chunks = (R + kLayerNormRowsPerPartial - 1) / kLayerNormRowsPerPartial;
  Tensor partial = workspace(size_t(std::max<int64_t>(1, 2 * N * chunks)) * sizeof(double), x.device());
  LayerNormBackwardArgs a{x.dtype(),
                          gy.dtype(),
                          R,
                          N,
                          gy.raw_data(),
                          x.raw_data(),
                          w.raw_data(),
                          m.raw_data(),
                          rs.raw_data(),
                          gs.defined() ? gs.raw_data() : nullptr,
                          out[0].raw_data(),
                          out.size() > 3 ? out[3].raw_data() : nullptr,
                          out[1].raw_data(),
                          out[2].raw_data(),
                          static_cast<double*>(partial.raw_data())};
  launch_layer_norm_backward(a);
}

void native_layer_norm_backward_cuda(const Ins& in, Outs& out, const Attrs&) { layer_norm_backward_rows(in, out); }
TR_REGISTER_KERNEL(native_layer_norm_backward, CUDA, native_layer_norm_backward_cuda);
TR_REGISTER_KERNEL(_add_native_layer_norm_backward, CUDA, native_layer_norm_backward_cuda);

}  // namespace

}  // namespace tr::cuda
