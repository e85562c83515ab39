// CUDA launchers of the Philox random fills (uniform_, normal_, dropout_mask): a contiguous
// stream of n values, element i from (seed, offset, i) exactly as lib/ops/cpu/random.cpp.
#include "ops/cuda/tensor_args.h"
#include "ops/registry.h"

namespace tr::cuda {

namespace {

// Fills t (any strides) with element i of the stream in row-major order.
void fill_stream(const Tensor& t, RandomOp op, const Attrs& a, double p0, double p1) {
  DeviceGuard g(t);
  Tensor c = t.is_contiguous() ? t : empty_like(t);
  launch_random(op, t.dtype(), c.raw_data(), c.numel(), uint64_t(a.i("seed")), uint64_t(a.i("offset")), p0, p1);
  if (!c.is_same(t)) t.detach().copy_(c);
}

void uniform_cuda(const std::vector<Tensor>& in, std::vector<Tensor>&, const Attrs& a) {
  fill_stream(in[0], RandomOp::Uniform, a, a.f("low"), a.f("high"));
}
void normal_cuda(const std::vector<Tensor>& in, std::vector<Tensor>&, const Attrs& a) {
  fill_stream(in[0], RandomOp::Normal, a, a.f("mean"), a.f("std"));
}
// out[i] = (U_i >= p) / (1 - p)
void dropout_mask_cuda(const std::vector<Tensor>&, std::vector<Tensor>& out, const Attrs& a) {
  const double p = a.f("p");
  fill_stream(out[0], RandomOp::DropoutMask, a, p, 1.0 / (1.0 - p));
}
TR_REGISTER_KERNEL(uniform_, CUDA, uniform_cuda);
TR_REGISTER_KERNEL(normal_, CUDA, normal_cuda);
TR_REGISTER_KERNEL(dropout_mask, CUDA, dropout_mask_cuda);

}  // namespace

}  // namespace tr::cuda
