// Reductions: sum, amax/amin, max/min along a dim (values + indices), argmax/argmin, var,
// norm; mean and std are compositions. Attrs: dims (resolved, sorted), keepdim.
#include <algorithm>
#include <cmath>
#include "core/grad_mode.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

namespace {

// Resolves dims (empty = all) to sorted unique non-negative dims.
Shape reduce_dims(const Tensor& x, const Shape& dims, const char* op) {
  Shape r;
  if (dims.empty()) {
    for (int64_t i = 0; i < x.dim(); ++i) r.push_back(i);
    return r;
  }
  for (auto d : dims) r.push_back(wrap_dim(d, x.dim(), op));
  std::sort(r.begin(), r.end());
  for (size_t i = 1; i < r.size(); ++i)
    TR_CHECK(r[i] != r[i - 1], op, ": dim ", r[i], " appears multiple times in ", dims);
  return r;
}

Shape reduced_shape(const Shape& in, const Shape& dims, bool keepdim) {
  Shape s;
  for (int64_t i = 0; i < int64_t(in.size()); ++i) {
    bool red = std::find(dims.begin(), dims.end(), i) != dims.end();
    if (!red)
      s.push_back(in[i]);
    else if (keepdim)
      s.push_back(1);
  }
  return s;
}

std::vector<TensorSpec> reduce_infer(const std::vector<Tensor>& in, const Attrs& a) {
  DType t = in[0].dtype();
  if (!is_floating(t)) t = DType::I64;
  return {{reduced_shape(in[0].sizes(), a.ints("dims"), a.b("keepdim")), t}};
}
std::vector<TensorSpec> same_dtype_reduce_infer(const std::vector<Tensor>& in, const Attrs& a) {
  return {{reduced_shape(in[0].sizes(), a.ints("dims"), a.b("keepdim")), in[0].dtype()}};
}

// g reshaped so that it broadcasts against the input (reduced dims as size 1).
Tensor unsqueeze_reduced(const Tensor& g, const Shape& in_sizes, const Attrs& a) {
  if (a.b("keepdim")) return g;
  return reshape(g, reduced_shape(in_sizes, a.ints("dims"), true));
}

}  // namespace

TR_REGISTER_OP(sum) {
  d.autocast = amp::CastPolicy::Fp32;
  d.num_inputs = 1;
  d.infer = reduce_infer;
  d.save_inputs = false;
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Shape& s = c.input_specs[0].sizes;
    return {expand(unsqueeze_reduced(G(c), s, c.attrs), s)};
  };
}
static std::vector<Tensor> amax_backward(const BackwardContext& c) {
  // The gradient is shared evenly among the elements equal to the extremum.
  const Tensor& x = c.inputs[0];
  Tensor y = unsqueeze_reduced(c.outputs[0], x.sizes(), c.attrs);
  Tensor g = unsqueeze_reduced(G(c), x.sizes(), c.attrs);
  Tensor mask = cast(x == y, G(c).dtype());
  Tensor count = sum(mask, c.attrs.ints("dims"), true);
  return {g * mask / count};
}
TR_REGISTER_OP(amax) {
  d.num_inputs = 1;
  d.infer = same_dtype_reduce_infer;
  d.save_outputs = true;
  d.backward = amax_backward;
}
TR_REGISTER_OP(amin) {
  d.num_inputs = 1;
  d.infer = same_dtype_reduce_infer;
  d.save_outputs = true;
  d.backward = amax_backward;
}
static std::vector<TensorSpec> max_dim_infer(const std::vector<Tensor>& in, const Attrs& a) {
  Shape s = reduced_shape(in[0].sizes(), a.ints("dims"), a.b("keepdim"));
  return {{s, in[0].dtype()}, {s, DType::I64}};
}
static std::vector<Tensor> max_dim_backward(const BackwardContext& c) {
  // d/dx: the gradient goes to the index that was selected (scatter along dim).
  const Shape& s = c.input_specs[0].sizes;
  int64_t dim = c.attrs.ints("dims")[0];
  Tensor idx = unsqueeze_reduced(c.outputs[1], s, c.attrs);
  Tensor g = unsqueeze_reduced(G(c), s, c.attrs);
  return {scatter_add(zeros(s, TensorOptions(g.dtype()).device(g.device())), dim, idx, g)};
}
TR_REGISTER_OP(max_dim) {
  d.num_inputs = 1;
  d.infer = max_dim_infer;
  d.save_inputs = false;
  d.save_outputs = true;
  d.backward = max_dim_backward;
}
TR_REGISTER_OP(min_dim) {
  d.num_inputs = 1;
  d.infer = max_dim_infer;
  d.save_inputs = false;
  d.save_outputs = true;
  d.backward = max_dim_backward;
}
static std::vector<TensorSpec> arg_infer(const std::vector<Tensor>& in, const Attrs& a) {
  return {{reduced_shape(in[0].sizes(), a.ints("dims"), a.b("keepdim")), DType::I64}};
}
TR_REGISTER_OP(argmax) {
  d.num_inputs = 1;
  d.infer = arg_infer;
  d.differentiable = false;
}
TR_REGISTER_OP(argmin) {
  d.num_inputs = 1;
  d.infer = arg_infer;
  d.differentiable = false;
}
TR_REGISTER_OP(var) {
  d.autocast = amp::CastPolicy::Fp32;
  // var = sum((x - mean)^2) / (N - correction); d/dx = 2 (x - mean) / (N - correction)
  d.num_inputs = 1;
  d.promote = Promote::CommonFloat;
  d.infer = same_dtype_reduce_infer;
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor& x = c.inputs[0];
    const Shape& dims = c.attrs.ints("dims");
    int64_t n = 1;
    for (auto dd : dims) n *= x.size(dd);
    Tensor g = unsqueeze_reduced(G(c), x.sizes(), c.attrs);
    return {g * (x - mean(x, dims, true)) * (2.0 / (double(n) - c.attrs.f("correction")))};
  };
}
TR_REGISTER_OP(norm) {
  d.autocast = amp::CastPolicy::Fp32;
  // ||x||_p = (sum |x|^p)^(1/p); p = inf: max |x|.
  d.num_inputs = 1;
  d.promote = Promote::CommonFloat;
  d.infer = same_dtype_reduce_infer;
  d.save_outputs = true;
  KernelFn k = [](const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) {
    NoGradGuard ng;
    double p = a.f("p");
    const Shape& dims = a.ints("dims");
    bool keep = a.b("keepdim");
    const Tensor& x = in[0];
    Tensor r;
    if (std::isinf(p))
      r = p > 0 ? amax(abs(x), dims, keep) : amin(abs(x), dims, keep);
    else if (p == 2.0)
      r = sqrt(sum(x * x, dims, keep));
    else if (p == 1.0)
      r = sum(abs(x), dims, keep);
    else if (p == 0.0)
      r = sum(cast(x != 0.0, x.dtype()), dims, keep);
    else
      r = pow(sum(pow(abs(x), p), dims, keep), 1.0 / p);
    out[0].copy_(r);
  };
  d.kernels[int(DeviceType::CPU)] = k;
  d.kernels[int(DeviceType::CUDA)] = k;  // composite of reductions each device implements
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor& x = c.inputs[0];
    double p = c.attrs.f("p");
    Tensor y = unsqueeze_reduced(c.outputs[0], x.sizes(), c.attrs);
    Tensor g = unsqueeze_reduced(G(c), x.sizes(), c.attrs);
    Tensor z = zeros_like(x);
    if (p == 0.0) return {z};
    if (p == 1.0) return {g * sign(x)};
    if (std::isinf(p)) {
      Tensor mask = cast(abs(x) == y, x.dtype());
      return {g * sign(x) * mask / sum(mask, c.attrs.ints("dims"), true)};
    }
    if (p == 2.0) return {where(y == 0.0, z, g * x / y)};  // 0 at the origin, as torch
    // g * x |x|^(p-2) / ||x||^(p-1)
    return {where(y == 0.0, z, g * x * pow(abs(x), p - 2.0) / pow(y, p - 1.0))};
  };
}

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
  return dispatch1("sum", {x}, {{"dims", reduce_dims(x, dims, "sum")}, {"keepdim", keepdim}});
}
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
  TR_CHECK(is_floating(x.dtype()), "mean(): could not infer output dtype. Input dtype must be floating point, got ",
           dtype_name(x.dtype()));
  Shape rd = reduce_dims(x, dims, "mean");
  int64_t n = 1;
  for (auto d : rd) n *= x.size(d);
  return sum(x, rd, keepdim) / double(n);
}
Tensor var(const Tensor& x, const Shape& dims, double correction, bool keepdim) {
  return dispatch1("var", {x},
                   {{"dims", reduce_dims(x, dims, "var")}, {"correction", correction}, {"keepdim", keepdim}});
}
Tensor std(const Tensor& x, const Shape& dims, double correction, bool keepdim) {
  return sqrt(var(x, dims, correction, keepdim));
}
Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) {
  TR_CHECK(x.numel() > 0, "amax: expected a non-empty tensor");
  return dispatch1("amax", {x}, {{"dims", reduce_dims(x, dims, "amax")}, {"keepdim", keepdim}});
}
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) {
  TR_CHECK(x.numel() > 0, "amin: expected a non-empty tensor");
  return dispatch1("amin", {x}, {{"dims", reduce_dims(x, dims, "amin")}, {"keepdim", keepdim}});
}
Tensor max(const Tensor& x) { return amax(x); }
Tensor min(const Tensor& x) { return amin(x); }
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) {
  TR_CHECK(x.numel() > 0, "max: expected a non-empty tensor");
  auto r = dispatch("max_dim", {x}, {{"dims", Shape{wrap_dim(dim, x.dim(), "max")}}, {"keepdim", keepdim}});
  return {r[0], r[1]};
}
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) {
  TR_CHECK(x.numel() > 0, "min: expected a non-empty tensor");
  auto r = dispatch("min_dim", {x}, {{"dims", Shape{wrap_dim(dim, x.dim(), "min")}}, {"keepdim", keepdim}});
  return {r[0], r[1]};
}
static Tensor arg_reduce(const char* op, const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  TR_CHECK(x.numel() > 0, op, ": expected a non-empty tensor");
  if (!dim) {
    Tensor r = dispatch1(op, {reshape(x, {-1})}, {{"dims", Shape{0}}, {"keepdim", false}});
    return keepdim ? reshape(r, Shape(size_t(x.dim()), 1)) : r;
  }
  return dispatch1(op, {x}, {{"dims", Shape{wrap_dim(*dim, x.dim(), op)}}, {"keepdim", keepdim}});
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_reduce("argmax", x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_reduce("argmin", x, dim, keepdim);
}
Tensor norm(const Tensor& x, double p, const Shape& dims, bool keepdim) {
  return dispatch1("norm", {x}, {{"dims", reduce_dims(x, dims, "norm")}, {"p", p}, {"keepdim", keepdim}});
}
Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.sizes() == shape) return x;
  int64_t lead = x.dim() - int64_t(shape.size());
  TR_CHECK(lead >= 0, "sum_to: cannot sum shape ", x.sizes(), " to ", shape);
  Shape dims;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < lead)
      dims.push_back(i);
    else if (shape[i - lead] == 1 && x.size(i) != 1)
      dims.push_back(i);
    else
      TR_CHECK(shape[i - lead] == x.size(i) || shape[i - lead] == 1, "sum_to: cannot sum shape ", x.sizes(), " to ",
               shape);
  }
  Tensor r = dims.empty() ? x : sum(x, dims, true);
  return lead > 0 || r.sizes() != shape ? reshape(r, shape) : r;
}

}  // namespace tr
