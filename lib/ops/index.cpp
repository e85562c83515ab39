// Indexing ops: index_select / index_add and gather / scatter_add are adjoint pairs, so each is
// the other's backward; embedding, one_hot, cat and stack compose or pair with them.
#include "ops/infer.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

namespace {

void check_index(const Tensor& idx, const char* op) {
  TR_CHECK(idx.dtype() == DType::I64 || idx.dtype() == DType::I32, op, ": index must be an int64 or int32 tensor, got ",
           dtype_name(idx.dtype()));
}

}  // namespace

TR_REGISTER_OP(index_select) {
  d.num_inputs = 2;
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    Shape s = in[0].sizes();
    if (!s.empty()) s[a.i("dim")] = in[1].numel();
    return {{s, in[0].dtype()}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const auto& spec = c.input_specs[0];
    Tensor z = zeros(spec.sizes, TensorOptions(G(c).dtype()).device(G(c).device()));
    return {index_add(z, c.attrs.i("dim"), c.inputs[1], G(c)), Tensor()};
  };
}
TR_REGISTER_OP(index_add) {
  d.num_inputs = 3;
  d.infer = infer_same;
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    return {G(c), Tensor(), index_select(G(c), c.attrs.i("dim"), c.inputs[1])};
  };
}
TR_REGISTER_OP(gather) {
  d.num_inputs = 2;
  d.infer = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<TensorSpec> {
    return {{in[1].sizes(), in[0].dtype()}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const auto& spec = c.input_specs[0];
    Tensor z = zeros(spec.sizes, TensorOptions(G(c).dtype()).device(G(c).device()));
    return {scatter_add(z, c.attrs.i("dim"), c.inputs[1], G(c)), Tensor()};
  };
}
TR_REGISTER_OP(scatter_add) {
  d.num_inputs = 3;
  d.infer = infer_same;
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    return {G(c), Tensor(), gather(G(c), c.attrs.i("dim"), c.inputs[1])};
  };
}
TR_REGISTER_OP(cat) {
  d.autocast = amp::CastPolicy::Promote;
  d.num_inputs = -1;
  d.promote = Promote::Common;
  d.save_inputs = false;
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    int64_t dim = a.i("dim");
    Shape s = in[0].sizes();
    s[dim] = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const Tensor& t = in[i];
      TR_CHECK(t.dim() == int64_t(s.size()), "cat: tensor ", i, " has ", t.dim(), " dims but tensor 0 has ", s.size(),
               " (shapes ", in[0].sizes(), " and ", t.sizes(), ")");
      for (int64_t k = 0; k < t.dim(); ++k)
        TR_CHECK(k == dim || t.size(k) == in[0].size(k), "cat: sizes of tensors must match except in dimension ", dim,
                 "; expected size ", in[0].size(k), " but got size ", t.size(k), " for tensor number ", i,
                 " in the list (shapes ", in[0].sizes(), " and ", t.sizes(), ")");
      s[dim] += t.size(dim);
    }
    return {{s, in[0].dtype()}};
  };
  KernelFn k = [](const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) {
    int64_t dim = a.i("dim"), off = 0;
    for (auto& t : in) {
      out[0].narrow(dim, off, t.size(dim)).copy_(t);
      off += t.size(dim);
    }
  };
  d.kernels[int(DeviceType::CPU)] = k;
  d.kernels[int(DeviceType::CUDA)] = k;  // composite of copy_ into narrowed views
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    int64_t dim = c.attrs.i("dim"), off = 0;
    std::vector<Tensor> r;
    for (auto& s : c.input_specs) {
      r.push_back(narrow(G(c), dim, off, s.sizes[dim]));
      off += s.sizes[dim];
    }
    return r;
  };
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_index(index, "index_select");
  TR_CHECK(index.dim() <= 1, "index_select: index must be 0-D or 1-D, got shape ", index.sizes());
  dim = wrap_dim(dim, x.dim(), "index_select");
  return dispatch1("index_select", {x, index}, {{"dim", dim}});
}
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_index(index, "index_add");
  dim = wrap_dim(dim, x.dim(), "index_add");
  Shape want = x.sizes();
  if (!want.empty()) want[dim] = index.numel();
  TR_CHECK(src.sizes() == want, "index_add: source shape ", src.sizes(), " does not match expected ", want);
  return dispatch1("index_add", {x, index, src.dtype() == x.dtype() ? src : cast(src, x.dtype())}, {{"dim", dim}});
}
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_index(index, "gather");
  dim = wrap_dim(dim, x.dim(), "gather");
  TR_CHECK(index.dim() == x.dim(), "gather: index has ", index.dim(), " dims but input has ", x.dim(), " (shapes ",
           index.sizes(), " and ", x.sizes(), ")");
  for (int64_t k = 0; k < x.dim(); ++k)
    TR_CHECK(k == dim || index.size(k) <= x.size(k), "gather: index shape ", index.sizes(), " exceeds input shape ",
             x.sizes(), " at dimension ", k);
  return dispatch1("gather", {x, index}, {{"dim", dim}});
}
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_index(index, "scatter_add");
  dim = wrap_dim(dim, x.dim(), "scatter_add");
  TR_CHECK(index.dim() == x.dim() && src.dim() == x.dim(), "scatter_add: index ", index.sizes(), ", src ", src.sizes(),
           " and self ", x.sizes(), " must have the same number of dimensions");
  for (int64_t k = 0; k < x.dim(); ++k) {
    TR_CHECK(index.size(k) <= src.size(k), "scatter_add: index shape ", index.sizes(), " exceeds src shape ",
             src.sizes());
    TR_CHECK(k == dim || index.size(k) <= x.size(k), "scatter_add: index shape ", index.sizes(), " exceeds self shape ",
             x.sizes(), " at dimension ", k);
  }
  return dispatch1("scatter_add", {x, index, src.dtype() == x.dtype() ? src : cast(src, x.dtype())}, {{"dim", dim}});
}
Tensor embedding(const Tensor& weight, const Tensor& indices) {
  TR_CHECK(weight.dim() == 2, "embedding: weight must be 2-D [num_embeddings, embedding_dim], got ", weight.sizes());
  Shape out = indices.sizes();
  out.push_back(weight.size(1));
  return index_select(weight, 0, indices.reshape({-1})).view(out);
}
Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  check_index(indices, "one_hot");
  Shape s = indices.sizes();
  s.push_back(num_classes);
  Tensor z = zeros(s, TensorOptions(DType::I64).device(indices.device()));
  Tensor idx = indices.to(DType::I64).unsqueeze(-1);
  return scatter_add(z, -1, idx, ones(idx.sizes(), TensorOptions(DType::I64).device(indices.device())));
}
Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  TR_CHECK(!xs.empty(), "cat: expected a non-empty list of tensors");
  dim = wrap_dim(dim, xs[0].dim(), "cat");
  return dispatch1("cat", xs, {{"dim", dim}});
}
Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  TR_CHECK(!xs.empty(), "stack: expected a non-empty list of tensors");
  dim = wrap_dim(dim, xs[0].dim() + 1, "stack");
  std::vector<Tensor> u;
  for (size_t i = 0; i < xs.size(); ++i) {
    TR_CHECK(xs[i].sizes() == xs[0].sizes(), "stack: expects each tensor to be equal size, but got ", xs[0].sizes(),
             " at entry 0 and ", xs[i].sizes(), " at entry ", i);
    u.push_back(unsqueeze(xs[i], dim));
  }
  return cat(u, dim);
}

}  // namespace tr
