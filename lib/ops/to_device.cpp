// _to_copy: a tensor moved to another device (what Tensor::to(Device) dispatches; torch's
// _to_copy, grad_fn ToCopyBackward0). The gradient moves back to the source device. The copy goes
// through core's runtime hooks, so one kernel serves every source device.
#include "core/cuda_hooks.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

namespace {

Device attr_device(const Attrs& a, const char* type_key, const char* index_key) {
  return Device(DeviceType(a.i(type_key)), int(a.i(index_key)));
}

std::vector<TensorSpec> infer_to_copy(const std::vector<Tensor>& in, const Attrs& a) {
  return {{in[0].sizes(), in[0].dtype(), attr_device(a, "dst_type", "dst_index")}};
}

// out = in, byte for byte, across devices (in made contiguous first)
void to_copy_kernel(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const Tensor src = in[0].contiguous();
  cuda::memcpy(out[0].raw_data(), out[0].device(), src.raw_data(), src.device(),
               size_t(src.numel()) * src.element_size());
}

}  // namespace

TR_REGISTER_OP(_to_copy) {
  d.num_inputs = 1;
  d.infer = infer_to_copy;
  d.save_inputs = false;
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    return {c.grads[0].to(attr_device(c.attrs, "src_type", "src_index"))};
  };
}
TR_REGISTER_KERNEL(_to_copy, CPU, to_copy_kernel);
TR_REGISTER_KERNEL(_to_copy, CUDA, to_copy_kernel);

}  // namespace tr
