// CUDA launcher of _fused_cast: the tensors of each source dtype become a table of pointers and one
// of chunks, copied to the device (staged, no host wait), then one launch (ops/cuda/fused_cast_kernels.cu).
#include <cstring>
#include <map>
#include "core/cuda_hooks.h"
#include "ops/cuda/fused_cast_launch.h"
#include "ops/cuda/tensor_args.h"
#include "ops/registry.h"

namespace tr::cuda {

namespace {

void fused_cast_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  DeviceGuard g(out[0]);
  std::map<DType, std::vector<size_t>> by_dtype;
  for (size_t i = 0; i < in.size(); ++i) by_dtype[in[i].dtype()].push_back(i);
  std::vector<Tensor> contiguous(in.size());
  for (const auto& [from, idx] : by_dtype) {
    std::vector<CastTensor> ts;
    std::vector<CastChunk> cs;
    for (size_t i : idx) {
      contiguous[i] = in[i].contiguous();
      ts.push_back({contiguous[i].raw_data(), out[i].raw_data(), in[i].numel()});
      for (int64_t s = 0; s < in[i].numel(); s += kCastChunk) cs.push_back({int32_t(ts.size() - 1), s});
    }
    const auto t = upload_tables(ts, cs, out[0].device());
    launch_fused_cast(from, out[0].dtype(), t.a, t.b, int64_t(cs.size()));
  }
}
TR_REGISTER_KERNEL(_fused_cast, CUDA, fused_cast_cuda);

}  // namespace

}  // namespace tr::cuda
