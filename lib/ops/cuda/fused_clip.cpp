// CUDA launchers of _fused_total_norm and _fused_clip_scale_: the tensors become a table of
// pointers and one of chunks, copied to the device together (staged, no host wait), then two
// launches for the norm and one for the scale (ops/cuda/fused_clip_kernels.cu).
#include <cstring>
#include "core/cuda_hooks.h"
#include "ops/clip_math.h"
#include "ops/cuda/fused_clip_launch.h"
#include "ops/cuda/tensor_args.h"
#include "ops/registry.h"

namespace tr::cuda {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

struct ClipTables {
  Tensor buffer;
  const NormTensor* tensors = nullptr;
  const NormChunk* chunks = nullptr;
  int64_t n = 0, n_chunks = 0;
};

// The tables of tensors ts[0, n) on the device.
ClipTables upload_clip_tables(const Ins& ts, size_t n) {
  std::vector<NormTensor> tt;
  std::vector<NormChunk> cs;
  for (size_t i = 0; i < n; ++i) {
    tt.push_back({ts[i].raw_data(), ts[i].numel(), int64_t(cs.size())});
    for (int64_t s = 0; s < ts[i].numel(); s += clip_math::kNormChunk) cs.push_back({int32_t(i), s});
  }
  auto d = upload_tables(tt, cs, ts[0].device());
  return {d.buffer, d.a, d.b, int64_t(n), int64_t(cs.size())};
}

void total_norm_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard g(in[0]);
  const ClipTables t = upload_clip_tables(in, in.size());
  const DType dt = in[0].dtype();
  const Tensor partial =
      workspace(size_t(std::max<int64_t>(1, t.n_chunks)) * (dt == DType::F64 ? 8 : 4), in[0].device());
  launch_fused_total_norm(dt, a.f("norm_type"), t.tensors, t.n, t.chunks, t.n_chunks, partial.raw_data(),
                          out[0].raw_data());
}
TR_REGISTER_KERNEL(_fused_total_norm, CUDA, total_norm_cuda);

void clip_scale_cuda(const Ins& in, Outs&, const Attrs& a) {
  DeviceGuard g(in[0]);
  const ClipTables t = upload_clip_tables(in, in.size() - 1);
  launch_fused_clip_scale(in[0].dtype(), a.f("max_norm"), t.tensors, t.chunks, t.n_chunks, in.back().raw_data());
}
TR_REGISTER_KERNEL(_fused_clip_scale_, CUDA, clip_scale_cuda);

}  // namespace

}  // namespace tr::cuda
