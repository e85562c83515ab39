// View ops: outputs alias the input's storage with new sizes/strides/offset. Their backward maps
// the gradient back to the input's geometry with differentiable ops.
#include <numeric>
#include "core/grad_mode.h"
#include "ops/infer.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

namespace {

Tensor make_view(const Tensor& x, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = x.storage();
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = x.dtype();
  return Tensor(impl);
}

// Resolves one -1 in `shape` against numel.
Shape infer_size(const Shape& shape, int64_t numel, const char* op, const Shape& from) {
  Shape r = shape;
  int64_t known = 1, neg = -1;
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i] == -1) {
      TR_CHECK(neg < 0, op, ": only one dimension can be inferred in shape ", shape);
      neg = int64_t(i);
    } else {
      TR_CHECK(r[i] >= 0, op, ": invalid shape dimension ", r[i], " in ", shape);
      known *= r[i];
    }
  }
  if (neg >= 0) {
    TR_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape, " is invalid for input of size ", numel,
             " (shape ", from, ")");
    r[neg] = numel / known;
  }
  TR_CHECK(numel_of(r) == numel, op, ": shape ", shape, " is invalid for input of size ", numel, " (shape ", from, ")");
  return r;
}

// Strides for viewing (sizes, strides) as `shape` without copying, if possible (torch's computeStride).
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& shape) {
  if (sizes.empty()) return contiguous_strides(shape);
  int64_t numel = numel_of(sizes);
  if (numel == 0) return contiguous_strides(shape);
  Shape ns(shape.size());
  int64_t view_d = int64_t(shape.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t td = int64_t(sizes.size()) - 1; td >= 0; td--) {
    tensor_numel *= sizes[td];
    if (td == 0 || (sizes[td - 1] != 1 && strides[td - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        ns[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (td > 0) {
        chunk_base_stride = strides[td - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return ns;
}

void view_op(OpDef& d, ViewFn fn, BackwardFn bw) {
  d.kind = OpKind::View;
  d.view = fn;
  d.backward = bw;
  d.save_inputs = false;
}

}  // namespace

TR_REGISTER_OP(view) {
  view_op(
      d,
      [](const Tensor& x, const Attrs& a) {
        Shape s = infer_size(a.ints("shape"), x.numel(), "view", x.sizes());
        auto st = view_strides(x.sizes(), x.strides(), s);
        TR_CHECK(st, "view: size ", a.ints("shape"), " is not compatible with input tensor's size ", x.sizes(),
                 " and stride ", x.strides(),
                 " (at least one dimension spans across two contiguous subspaces). "
                 "Use reshape() instead.");
        return make_view(x, s, *st, x.storage_offset());
      },
      [](const BackwardContext& c) -> std::vector<Tensor> { return {reshape(G(c), in_shape(c))}; });
}
TR_REGISTER_OP(transpose) {
  view_op(
      d,
      [](const Tensor& x, const Attrs& a) {
        int64_t d0 = wrap_dim(a.i("dim0"), x.dim(), "transpose"), d1 = wrap_dim(a.i("dim1"), x.dim(), "transpose");
        Shape s = x.sizes(), st = x.strides();
        if (x.dim() > 0) {
          std::swap(s[d0], s[d1]);
          std::swap(st[d0], st[d1]);
        }
        return make_view(x, s, st, x.storage_offset());
      },
      [](const BackwardContext& c) -> std::vector<Tensor> {
        return {transpose(G(c), c.attrs.i("dim0"), c.attrs.i("dim1"))};
      });
}
TR_REGISTER_OP(permute) {
  view_op(
      d,
      [](const Tensor& x, const Attrs& a) {
        const Shape& dims = a.ints("dims");
        TR_CHECK(int64_t(dims.size()) == x.dim(), "permute: number of dims ", dims, " doesn't match the tensor's ",
                 x.dim(), " dims (shape ", x.sizes(), ")");
        Shape s(dims.size()), st(dims.size());
        std::vector<bool> seen(dims.size());
        for (size_t i = 0; i < dims.size(); ++i) {
          int64_t dd = wrap_dim(dims[i], x.dim(), "permute");
          TR_CHECK(!seen[dd], "permute: repeated dim in ", dims);
          seen[dd] = true;
          s[i] = x.size(dd);
          st[i] = x.stride(dd);
        }
        return make_view(x, s, st, x.storage_offset());
      },
      [](const BackwardContext& c) -> std::vector<Tensor> {
        const Shape& dims = c.attrs.ints("dims");
        Shape inv(dims.size());
        for (size_t i = 0; i < dims.size(); ++i) inv[wrap_dim(dims[i], int64_t(dims.size()), "permute")] = int64_t(i);
        return {permute(G(c), inv)};
      });
}
TR_REGISTER_OP(slice) {
  view_op(
      d,
      [](const Tensor& x, const Attrs& a) {
        TR_CHECK(x.dim() > 0, "slice: cannot slice a 0-dim tensor");
        int64_t dim = wrap_dim(a.i("dim"), x.dim(), "slice");
        int64_t start = a.i("start"), end = a.i("end"), step = a.i("step");
        Shape s = x.sizes(), st = x.strides();
        s[dim] = (end - start + step - 1) / step;
        st[dim] *= step;
        return make_view(x, s, st, x.storage_offset() + start * x.stride(dim));
      },
      [](const BackwardContext& c) -> std::vector<Tensor> {
        return {dispatch1("slice_backward", {G(c)},
                          {{"input_sizes", in_shape(c)},
                           {"dim", c.attrs.i("dim")},
                           {"start", c.attrs.i("start")},
                           {"end", c.attrs.i("end")},
                           {"step", c.attrs.i("step")}})};
      });
}
// slice_backward(g): zeros of the input's shape with g written into the slice.
TR_REGISTER_OP(slice_backward) {
  d.num_inputs = 1;
  d.save_inputs = false;
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    return {{a.ints("input_sizes"), in[0].dtype()}};
  };
  KernelFn k = [](const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) {
    NoGradGuard ng;
    out[0].zero_();
    out[0].slice(a.i("dim"), a.i("start"), a.i("end"), a.i("step")).copy_(in[0]);
  };
  d.kernels[int(DeviceType::CPU)] = k;
  d.kernels[int(DeviceType::CUDA)] = k;  // composite of fill_ and copy_, which each device implements
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    return {slice(G(c), c.attrs.i("dim"), c.attrs.i("start"), c.attrs.i("end"), c.attrs.i("step"))};
  };
}
TR_REGISTER_OP(select) {
  view_op(
      d,
      [](const Tensor& x, const Attrs& a) {
        TR_CHECK(x.dim() > 0, "select: cannot select from a 0-dim tensor");
        int64_t dim = wrap_dim(a.i("dim"), x.dim(), "select");
        int64_t i = a.i("index");
        Shape s = x.sizes(), st = x.strides();
        s.erase(s.begin() + dim);
        st.erase(st.begin() + dim);
        return make_view(x, s, st, x.storage_offset() + i * x.stride(dim));
      },
      [](const BackwardContext& c) -> std::vector<Tensor> {
        int64_t dim = wrap_dim(c.attrs.i("dim"), int64_t(in_shape(c).size()), "select");
        int64_t i = c.attrs.i("index");
        return {dispatch1(
            "slice_backward", {unsqueeze(G(c), dim)},
            {{"input_sizes", in_shape(c)}, {"dim", dim}, {"start", i}, {"end", i + 1}, {"step", int64_t(1)}})};
      });
}
TR_REGISTER_OP(unsqueeze) {
  view_op(
      d,
      [](const Tensor& x, const Attrs& a) {
        int64_t dim = wrap_dim(a.i("dim"), x.dim() + 1, "unsqueeze");
        Shape s = x.sizes(), st = x.strides();
        int64_t ns = dim < x.dim() ? s[dim] * st[dim] : 1;
        s.insert(s.begin() + dim, 1);
        st.insert(st.begin() + dim, ns);
        return make_view(x, s, st, x.storage_offset());
      },
      [](const BackwardContext& c) -> std::vector<Tensor> { return {reshape(G(c), in_shape(c))}; });
}
TR_REGISTER_OP(squeeze) {
  view_op(
      d,
      [](const Tensor& x, const Attrs& a) {
        Shape s, st;
        int64_t only = a.b("all") ? -1 : wrap_dim(a.i("dim"), x.dim(), "squeeze");
        for (int64_t i = 0; i < x.dim(); ++i) {
          bool drop = x.size(i) == 1 && (only < 0 || i == only);
          if (!drop) {
            s.push_back(x.size(i));
            st.push_back(x.stride(i));
          }
        }
        return make_view(x, s, st, x.storage_offset());
      },
      [](const BackwardContext& c) -> std::vector<Tensor> { return {reshape(G(c), in_shape(c))}; });
}
TR_REGISTER_OP(expand) {
  view_op(
      d,
      [](const Tensor& x, const Attrs& a) {
        const Shape& want = a.ints("shape");
        TR_CHECK(want.size() >= size_t(x.dim()), "expand: the number of sizes provided (", want.size(),
                 ") must be greater or equal to the number of dimensions in the tensor (", x.dim(), ")");
        size_t off = want.size() - size_t(x.dim());
        Shape s(want.size()), st(want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          if (i < off) {
            TR_CHECK(want[i] >= 0, "expand: ", want, " is invalid for a new leading dimension");
            s[i] = want[i];
            st[i] = 0;
            continue;
          }
          int64_t cur = x.size(int64_t(i - off));
          int64_t w = want[i] == -1 ? cur : want[i];
          TR_CHECK(cur == w || cur == 1, "expand: the expanded size of the tensor (", w,
                   ") must match the existing size (", cur, ") at non-singleton dimension ", i,
                   ". Target sizes: ", want, ". Tensor sizes: ", x.sizes());
          s[i] = w;
          st[i] = (cur == 1 && w != 1) ? 0 : x.stride(int64_t(i - off));
        }
        return make_view(x, s, st, x.storage_offset());
      },
      [](const BackwardContext& c) -> std::vector<Tensor> { return {sum_to(G(c), in_shape(c))}; });
}
// clone: a contiguous copy (also the body of contiguous() on a strided tensor).
TR_REGISTER_OP(clone) {
  d.num_inputs = 1;
  d.save_inputs = false;
  d.infer = infer_same;
  KernelFn k = [](const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
    dispatch("copy_", {out[0], in[0]});
  };
  d.kernels[int(DeviceType::CPU)] = k;
  d.kernels[int(DeviceType::CUDA)] = k;
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> { return {G(c)}; };
}

Tensor view(const Tensor& x, const Shape& shape) { return dispatch1("view", {x}, {{"shape", shape}}); }
Tensor reshape(const Tensor& x, const Shape& shape) {
  Shape s = infer_size(shape, x.numel(), "reshape", x.sizes());
  if (s == x.sizes()) return x;
  if (view_strides(x.sizes(), x.strides(), s)) return view(x, s);
  return view(clone(x), s);
}
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  return dispatch1("transpose", {x}, {{"dim0", d0}, {"dim1", d1}});
}
Tensor permute(const Tensor& x, const Shape& dims) { return dispatch1("permute", {x}, {{"dims", dims}}); }
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  TR_CHECK(x.dim() > 0, "slice: cannot slice a 0-dim tensor");
  dim = wrap_dim(dim, x.dim(), "slice");
  TR_CHECK(step > 0, "slice: step must be positive, got ", step);
  int64_t n = x.size(dim);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  return dispatch1("slice", {x}, {{"dim", dim}, {"start", start}, {"end", end}, {"step", step}});
}
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  TR_CHECK(x.dim() > 0, "narrow: cannot narrow a 0-dim tensor");
  dim = wrap_dim(dim, x.dim(), "narrow");
  int64_t n = x.size(dim);
  if (start < 0) start += n;
  TR_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow: start (", start, ") + length (", length,
           ") exceeds dimension size (", n, ") of dim ", dim, " in shape ", x.sizes());
  return dispatch1("slice", {x}, {{"dim", dim}, {"start", start}, {"end", start + length}, {"step", int64_t(1)}});
}
Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  TR_CHECK(x.dim() > 0, "select: cannot select from a 0-dim tensor");
  dim = wrap_dim(dim, x.dim(), "select");
  int64_t n = x.size(dim);
  TR_CHECK(index >= -n && index < n, "select: index ", index, " is out of bounds for dimension ", dim, " with size ",
           n);
  if (index < 0) index += n;
  return dispatch1("select", {x}, {{"dim", dim}, {"index", index}});
}
Tensor unsqueeze(const Tensor& x, int64_t dim) { return dispatch1("unsqueeze", {x}, {{"dim", dim}}); }
Tensor squeeze(const Tensor& x, std::optional<int64_t> dim) {
  return dispatch1("squeeze", {x}, {{"dim", dim.value_or(0)}, {"all", !dim.has_value()}});
}
Tensor expand(const Tensor& x, const Shape& shape) {
  if (shape == x.sizes()) return x;
  return dispatch1("expand", {x}, {{"shape", shape}});
}
Tensor flatten(const Tensor& x, int64_t start, int64_t end) {
  if (x.dim() == 0) return reshape(x, {1});
  start = wrap_dim(start, x.dim(), "flatten");
  end = wrap_dim(end, x.dim(), "flatten");
  TR_CHECK(start <= end, "flatten: start_dim (", start, ") cannot come after end_dim (", end, ")");
  Shape s(x.sizes().begin(), x.sizes().begin() + start);
  int64_t m = 1;
  for (int64_t i = start; i <= end; ++i) m *= x.size(i);
  s.push_back(m);
  s.insert(s.end(), x.sizes().begin() + end + 1, x.sizes().end());
  return reshape(x, s);
}
Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }
Tensor clone(const Tensor& x) { return dispatch1("clone", {x}); }
std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  dim = wrap_dim(dim, x.dim(), "unbind");
  std::vector<Tensor> r;
  for (int64_t i = 0; i < x.size(dim); ++i) r.push_back(select(x, dim, i));
  return r;
}

}  // namespace tr
