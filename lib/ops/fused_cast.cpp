// The op _fused_cast (ops/fused_cast.h).
#include "ops/fused_cast.h"
#include "ops/registry.h"

namespace tr {

TR_REGISTER_OP(_fused_cast) {
  d.num_inputs = -1;
  d.save_inputs = false;
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    TR_CHECK(!in.empty(), "_fused_cast: expected at least one tensor");
    const DType to = DType(a.i("dtype"));
    TR_CHECK(is_floating(to), "_fused_cast: the target dtype must be floating, got ", dtype_name(to));
    std::vector<TensorSpec> out;
    for (size_t i = 0; i < in.size(); ++i) {
      TR_CHECK(is_floating(in[i].dtype()) && in[i].device() == in[0].device(), "_fused_cast: tensor ", i, " (",
               dtype_name(in[i].dtype()), " on ", in[i].device().str(), ") must be floating and on ",
               in[0].device().str());
      out.push_back({in[i].sizes(), to});
    }
    return out;
  };
  // each gradient back to its input's dtype, again in one op (grouped by dtype: parameters share one)
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    std::vector<Tensor> r(c.grads.size());
    std::vector<size_t> todo(c.grads.size());
    for (size_t i = 0; i < todo.size(); ++i) todo[i] = i;
    while (!todo.empty()) {
      const DType t = c.input_specs[todo[0]].dtype;
      std::vector<size_t> now, later;
      for (size_t i : todo) (c.input_specs[i].dtype == t ? now : later).push_back(i);
      std::vector<Tensor> gs;
      for (size_t i : now) gs.push_back(c.grads[i]);
      const std::vector<Tensor> back = fused_cast(gs, t);
      for (size_t k = 0; k < now.size(); ++k) r[now[k]] = back[k];
      todo = later;
    }
    return r;
  };
}

std::vector<Tensor> fused_cast(const std::vector<Tensor>& tensors, DType dtype) {
  return dispatch("_fused_cast", tensors, {{"dtype", int64_t(dtype)}});
}

}  // namespace tr
