// CUDA launchers of _fused_sgd_ and _fused_adam_: the tensors of one dtype become a table of
// pointers and scalars plus a table of chunks, copied to the device (staged, no host wait) and
// consumed by one launch (ops/cuda/fused_optim_kernels.cu).
#include <cstring>
#include <map>
#include "core/cuda_hooks.h"
#include "ops/cuda/tensor_args.h"
#include "ops/fused_optim.h"
#include "ops/registry.h"

namespace tr::cuda {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

// The tables of one launch, on the device: FusedTensor[n] then FusedChunk[chunks].
struct OptimTables {
  Tensor buffer;
  const FusedTensor* tensors = nullptr;
  const FusedChunk* chunks = nullptr;
  int64_t n_chunks = 0;
};

OptimTables upload_optim_tables(const std::vector<FusedTensor>& ts, Device dev) {
  std::vector<FusedChunk> cs;
  for (size_t i = 0; i < ts.size(); ++i)
    for (int64_t s = 0; s < ts[i].numel; s += kFusedChunk) cs.push_back({int32_t(i), s});
  auto d = upload_tables(ts, cs, dev);
  return {d.buffer, d.a, d.b, int64_t(cs.size())};
}

// The tensors of `lists` lists of n, grouped by the parameter's dtype.
std::map<DType, std::vector<FusedTensor>> by_dtype(const Ins& in, size_t n, size_t lists) {
  std::map<DType, std::vector<FusedTensor>> groups;
  for (size_t i = 0; i < n; ++i) {
    FusedTensor f;
    for (size_t l = 0; l < lists; ++l) f.ptr[l] = in[l * n + i].raw_data();
    f.numel = in[i].numel();
    groups[in[i].dtype()].push_back(f);
  }
  return groups;
}

void fused_sgd_cuda(const Ins& in, Outs&, const Attrs& a) {
  if (in.empty()) return;
  DeviceGuard g(in[0]);
  const std::vector<int64_t>& first = a.ints("first");
  const size_t n = first.size();
  auto groups = by_dtype(in, n, a.f("momentum") != 0 ? 3 : 2);
  for (auto& [dt, ts] : groups) {
    size_t k = 0;
    for (size_t i = 0; i < n; ++i)
      if (in[i].dtype() == dt) ts[k++].first = int32_t(first[i]);
    OptimTables t = upload_optim_tables(ts, in[0].device());
    launch_fused_sgd(dt, sgd_scalars(a), t.tensors, t.chunks, t.n_chunks);
  }
}
TR_REGISTER_KERNEL(_fused_sgd_, CUDA, fused_sgd_cuda);

void fused_adam_cuda(const Ins& in, Outs&, const Attrs& a) {
  if (in.empty()) return;
  DeviceGuard g(in[0]);
  const std::vector<int64_t>& steps = a.ints("steps");
  const size_t n = steps.size();
  auto groups = by_dtype(in, n, a.b("amsgrad") ? 5 : 4);
  for (auto& [dt, ts] : groups) {
    size_t k = 0;
    for (size_t i = 0; i < n; ++i)
      if (in[i].dtype() == dt) ts[k++].adam = adam_scalars(a, double(steps[i]));
    OptimTables t = upload_optim_tables(ts, in[0].device());
    launch_fused_adam(dt, t.tensors, t.chunks, t.n_chunks);
  }
}
TR_REGISTER_KERNEL(_fused_adam_, CUDA, fused_adam_cuda);

}  // namespace

}  // namespace tr::cuda
