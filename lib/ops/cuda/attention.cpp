// CUDA launchers of attention_qkvpacked and its backward (ops/cuda/attention_kernels.cu).
#include "ops/cuda/tensor_args.h"
#include "ops/registry.h"

namespace tr::cuda {

namespace {

attn::Geometry geometry(const Tensor& qkv, const Attrs& a) {
  return attn::Geometry::of(qkv.size(0), qkv.size(1), qkv.size(2), a.i("n_head"), a.f("scale"), a.b("causal"));
}

void attention_qkvpacked_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) {
  DeviceGuard guard(out[0]);
  const Tensor qkv = in[0].contiguous();
  launch_attention(qkv.dtype(), geometry(qkv, a), qkv.raw_data(), out[0].raw_data(), out[1].raw_data());
}
TR_REGISTER_KERNEL(attention_qkvpacked, CUDA, attention_qkvpacked_cuda);

void attention_qkvpacked_backward_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) {
  DeviceGuard guard(out[0]);
  const Tensor dy = in[0].contiguous(), qkv = in[1].contiguous(), y = in[2].contiguous(), lse = in[3].contiguous();
  // D_i = dy_i . y_i of every row, in lse's dtype (the kernels' accumulation type)
  Tensor delta = empty(lse.sizes(), TensorOptions(lse.dtype()).device(lse.device()));
  launch_attention_backward(qkv.dtype(), geometry(qkv, a), dy.raw_data(), qkv.raw_data(), y.raw_data(), lse.raw_data(),
                            delta.raw_data(), out[0].raw_data());
}
TR_REGISTER_KERNEL(attention_qkvpacked_backward, CUDA, attention_qkvpacked_backward_cuda);

}  // namespace

}  // namespace tr::cuda
