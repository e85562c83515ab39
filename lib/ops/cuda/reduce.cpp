// CUDA launchers of the reductions (sum, amax/amin, max_dim/min_dim, argmax/argmin, var):
// strided geometry from the input as it is (no copy) unless it needs more than kMaxDims dims.
#include <algorithm>
#include "ops/cuda/tensor_args.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::cuda {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

// Reduces `dims` of x with `op` into `outs` (contiguous outputs of the kept dims' shape).
void reduce(ReduceOp op, const Tensor& x, const Shape& dims, ReduceOutputs outs) {
  DeviceGuard g(x);
  Tensor in = x;
  ReduceArgs a;
  if (!reduce_args(in, dims, a)) {
    // too many dims to merge: reduce a copy laid out as [kept..., reduced...]
    Shape perm;
    for (int64_t d = 0; d < x.dim(); ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) perm.push_back(d);
    perm.insert(perm.end(), dims.begin(), dims.end());
    in = x.detach().permute(perm).contiguous();
    Shape rdims;
    for (size_t i = perm.size() - dims.size(); i < perm.size(); ++i) rdims.push_back(int64_t(i));
    TR_CHECK(reduce_args(in, rdims, a), "reduction: geometry of shape ", x.sizes(), " could not be merged");
  }
  if (a.M == 0) return;
  const int dev = x.device().index;
  Tensor mean;
  if (op == ReduceOp::Var) {
    mean = empty({a.M}, TensorOptions(DType::F64).device(x.device()));
    outs.mean = mean.data_ptr<double>();
    ReducePlan plan = plan_reduce(ReduceOp::VarMean, in.dtype(), a, dev);
    Tensor ws = plan.workspace_bytes ? workspace(plan.workspace_bytes, x.device()) : Tensor();
    launch_reduce(ReduceOp::VarMean, in.dtype(), a, plan, ws.defined() ? ws.raw_data() : nullptr, outs);
  }
  ReducePlan plan = plan_reduce(op, in.dtype(), a, dev);
  Tensor ws = plan.workspace_bytes ? workspace(plan.workspace_bytes, x.device()) : Tensor();
  launch_reduce(op, in.dtype(), a, plan, ws.defined() ? ws.raw_data() : nullptr, outs);
}

ReduceOutputs values(const Tensor& v) { return ReduceOutputs{v.raw_data(), nullptr, nullptr, 0}; }
ReduceOutputs indices(const Tensor& i) { return ReduceOutputs{nullptr, i.data_ptr<int64_t>(), nullptr, 0}; }
ReduceOutputs both(const Tensor& v, const Tensor& i) {
  return ReduceOutputs{v.raw_data(), i.data_ptr<int64_t>(), nullptr, 0};
}

void sum_cuda(const Ins& in, Outs& out, const Attrs& a) {
  const DType want = is_floating(in[0].dtype()) ? in[0].dtype() : DType::I64;
  TR_CHECK(out[0].dtype() == want, "sum: output dtype ", dtype_name(out[0].dtype()), ", expected ", dtype_name(want));
  reduce(ReduceOp::Sum, in[0], a.ints("dims"), values(out[0]));
}
void amax_cuda(const Ins& in, Outs& out, const Attrs& a) {
  reduce(ReduceOp::Max, in[0], a.ints("dims"), values(out[0]));
}
void amin_cuda(const Ins& in, Outs& out, const Attrs& a) {
  reduce(ReduceOp::Min, in[0], a.ints("dims"), values(out[0]));
}
void max_dim_cuda(const Ins& in, Outs& out, const Attrs& a) {
  reduce(ReduceOp::Max, in[0], a.ints("dims"), both(out[0], out[1]));
}
void min_dim_cuda(const Ins& in, Outs& out, const Attrs& a) {
  reduce(ReduceOp::Min, in[0], a.ints("dims"), both(out[0], out[1]));
}
void argmax_cuda(const Ins& in, Outs& out, const Attrs& a) {
  reduce(ReduceOp::Max, in[0], a.ints("dims"), indices(out[0]));
}
void argmin_cuda(const Ins& in, Outs& out, const Attrs& a) {
  reduce(ReduceOp::Min, in[0], a.ints("dims"), indices(out[0]));
}
// var = sum((x - mean)^2) / max(0, N - correction): two passes in double, as the CPU kernel.
void var_cuda(const Ins& in, Outs& out, const Attrs& a) {
  ReduceOutputs o = values(out[0]);
  o.correction = a.f("correction");
  reduce(ReduceOp::Var, in[0], a.ints("dims"), o);
}
TR_REGISTER_KERNEL(sum, CUDA, sum_cuda);
TR_REGISTER_KERNEL(amax, CUDA, amax_cuda);
TR_REGISTER_KERNEL(amin, CUDA, amin_cuda);
TR_REGISTER_KERNEL(max_dim, CUDA, max_dim_cuda);
TR_REGISTER_KERNEL(min_dim, CUDA, min_dim_cuda);
TR_REGISTER_KERNEL(argmax, CUDA, argmax_cuda);
TR_REGISTER_KERNEL(argmin, CUDA, argmin_cuda);
TR_REGISTER_KERNEL(var, CUDA, var_cuda);

}  // namespace

}  // namespace tr::cuda
