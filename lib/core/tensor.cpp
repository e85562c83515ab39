#include "core/tensor.h"
#include <cmath>
#include <cstring>
#include "autograd/engine.h"
#include "autograd/function.h"
#include "core/grad_mode.h"
#include "autograd/node.h"
#include "core/cuda_hooks.h"
#include "ops/ops.h"

namespace tr {

// ---- shape helpers ----
int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (auto v : s) n *= v;
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (int64_t i = int64_t(s.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}

bool compute_contiguous(const Shape& sizes, const Shape& strides) {
  int64_t expected = 1;
  for (int64_t i = int64_t(sizes.size()) - 1; i >= 0; --i) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

int64_t wrap_dim(int64_t d, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);
  TR_CHECK(d >= -n && d < n, op, ": dimension out of range (expected to be in range of [", -n, ", ", n - 1,
           "], but got ", d, ")");
  return d < 0 ? d + n : d;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TR_CHECK(x == y || x == 1 || y == 1, op, *op ? ": " : "", "shapes ", a, " and ", b,
             " are not broadcastable (size ", x, " vs ", y, " at dimension ", i, ")");
    r[i] = x == 1 ? y : x;
  }
  return r;
}

// ---- metadata ----
const Shape& Tensor::sizes() const { return impl_->sizes; }
const Shape& Tensor::strides() const { return impl_->strides; }
int64_t Tensor::dim() const { return int64_t(impl_->sizes.size()); }
int64_t Tensor::size(int64_t d) const { return impl_->sizes[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return impl_->strides[wrap_dim(d, dim(), "stride")]; }
int64_t Tensor::numel() const { return numel_of(impl_->sizes); }
DType Tensor::dtype() const { return impl_->dtype; }
Device Tensor::device() const { return impl_->storage->device(); }
int64_t Tensor::storage_offset() const { return impl_->offset; }
bool Tensor::is_contiguous() const { return compute_contiguous(impl_->sizes, impl_->strides); }
void* Tensor::raw_data() const {
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * int64_t(itemsize(impl_->dtype));
}
const Storage& Tensor::storage() const { return impl_->storage; }
uint64_t Tensor::version() const { return impl_->storage->version(); }
bool Tensor::is_wrapped_number() const { return impl_->wrapped_number; }

double Tensor::item() const {
  TR_CHECK(numel() == 1, "item(): a Tensor with ", numel(), " elements cannot be converted to a scalar (shape ",
           sizes(), ")");
  Tensor c = device().is_cpu() ? *this : to(kCPU);
  double v = 0;
  TR_DISPATCH_ALL(c.dtype(), "item", [&] { v = double(static_cast<acc_t<scalar_t>>(*c.data_ptr<scalar_t>())); });
  return v;
}

std::vector<double> Tensor::tolist() const {
  Tensor c = to(kCPU, DType::F64).contiguous();
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

// ---- autograd ----
AutogradMeta* Tensor::autograd_meta() const { return impl_ ? impl_->autograd.get() : nullptr; }
AutogradMeta& Tensor::mutable_autograd_meta() const {
  if (!impl_->autograd) impl_->autograd = std::make_unique<AutogradMeta>();
  return *impl_->autograd;
}
bool Tensor::requires_grad() const {
  auto* m = autograd_meta();
  return m && m->requires_grad;
}
Tensor& Tensor::requires_grad_(bool r) {
  if (!r && !requires_grad()) return *this;
  TR_CHECK(is_leaf(), "requires_grad_: you can only change requires_grad flags of leaf variables; use detach()");
  TR_CHECK(!r || is_floating(dtype()), "requires_grad_: only tensors of floating point dtype can require gradients (got ",
           dtype_name(dtype()), ")");
  mutable_autograd_meta().requires_grad = r;
  return *this;
}
bool Tensor::is_leaf() const {
  auto* m = autograd_meta();
  return !m || !m->grad_fn;
}
const Tensor& Tensor::grad() const {
  static const Tensor none;
  auto* m = autograd_meta();
  return m ? m->grad : none;
}
void Tensor::set_grad(const Tensor& g) const {
  if (g.defined())
    TR_CHECK(g.sizes() == sizes(), "set_grad: assigned grad has shape ", g.sizes(), " but the tensor has shape ", sizes());
  mutable_autograd_meta().grad = g;
}
const std::shared_ptr<Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<Node> none;
  auto* m = autograd_meta();
  return m ? m->grad_fn : none;
}
uint32_t Tensor::output_nr() const {
  auto* m = autograd_meta();
  return m ? m->output_nr : 0;
}
void Tensor::backward(const Tensor& g, bool retain_graph, bool create_graph) const {
  autograd::backward({*this}, g.defined() ? std::vector<Tensor>{g} : std::vector<Tensor>{}, retain_graph, create_graph);
}
void Tensor::retain_grad() const {
  TR_CHECK(requires_grad(), "retain_grad: can't retain_grad on a Tensor that has requires_grad=False");
  if (is_leaf() || retains_grad()) return;
  AutogradMeta& m = mutable_autograd_meta();
  m.retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl_;
  m.retain_grad_hook = register_hook([weak](const Tensor& g) {
    if (auto impl = weak.lock()) {
      Tensor self(impl);
      AutogradMeta& mm = *impl->autograd;
      if (!mm.grad.defined()) mm.grad = g.detach().clone();
      else mm.grad = add(mm.grad, g.detach());
    }
    return Tensor();
  });
}
bool Tensor::retains_grad() const {
  auto* m = autograd_meta();
  return m && m->retains_grad;
}
Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->sizes = impl_->sizes;
  impl->strides = impl_->strides;
  impl->offset = impl_->offset;
  impl->dtype = impl_->dtype;
  impl->is_view = impl_->is_view;
  return Tensor(impl);
}
Tensor& Tensor::detach_() {
  if (impl_->autograd) {
    impl_->autograd->grad_fn.reset();
    impl_->autograd->requires_grad = false;
  }
  return *this;
}
int Tensor::register_hook(TensorHook hook) const {
  TR_CHECK(requires_grad(), "register_hook: cannot register a hook on a tensor that doesn't require gradient");
  Edge e = gradient_edge(*this);
  int id = next_hook_id();
  e.fn->pre_hooks[e.input_nr].push_back({id, std::move(hook)});
  return id;
}
void Tensor::remove_hook(int handle) const {
  Edge e = gradient_edge(*this);
  if (!e.fn) return;
  auto& v = e.fn->pre_hooks[e.input_nr];
  for (auto it = v.begin(); it != v.end(); ++it)
    if (it->first == handle) { v.erase(it); return; }
}
void Tensor::zero_grad(bool set_to_none) const {
  auto* m = autograd_meta();
  if (!m || !m->grad.defined()) return;
  if (set_to_none) {
    m->grad = Tensor();
  } else {
    if (m->grad.grad_fn()) m->grad = m->grad.detach();
    m->grad.zero_();
  }
}

// ---- conversions ----
Tensor Tensor::to(DType t) const { return dtype() == t ? *this : cast(*this, t); }
Tensor Tensor::to(Device d) const { return to(d, dtype()); }
namespace {
Tensor copy_to_device(const Tensor& x, Device d) {
  Tensor src = x.contiguous();
  Tensor out = empty(x.sizes(), TensorOptions(x.dtype()).device(d));
  cuda::memcpy(out.raw_data(), d, src.raw_data(), src.device(), size_t(x.numel()) * x.element_size());
  return out;
}
// Moving between devices is differentiable: the gradient moves back.
struct ToDevice {
  static std::vector<Tensor> forward(autograd::FunctionCtx& ctx, const std::vector<Tensor>& in) {
    Device src = in[0].device();
    ctx.saved_data.set("src_type", int64_t(src.type));
    ctx.saved_data.set("src_index", int64_t(src.index));
    Device dst(DeviceType(ctx.saved_data.i("dst_type")), int(ctx.saved_data.i("dst_index")));
    return {copy_to_device(in[0], dst)};
  }
  static std::vector<Tensor> backward(autograd::FunctionCtx& ctx, const std::vector<Tensor>& g) {
    Device src(DeviceType(ctx.saved_data.i("src_type")), int(ctx.saved_data.i("src_index")));
    return {g[0].to(src)};
  }
};
}  // namespace

Tensor Tensor::to(Device d, DType t) const {
  if (d == device()) return to(t);
  Tensor moved;
  if (requires_grad() && GradMode::is_enabled()) {
    moved = autograd::Function<ToDevice>::apply({*this}, "ToCopy",
                                                {{"dst_type", int64_t(d.type)}, {"dst_index", int64_t(d.index)}})[0];
  } else {
    moved = copy_to_device(*this, d);
  }
  return moved.to(t);
}
Tensor Tensor::clone() const { return tr::clone(*this); }
Tensor Tensor::contiguous() const { return is_contiguous() ? *this : tr::contiguous(*this); }

std::string Tensor::str() const {
  std::ostringstream os;
  os << *this;
  return os.str();
}

// ---- views ----
Tensor Tensor::view(const Shape& s) const { return tr::view(*this, s); }
Tensor Tensor::reshape(const Shape& s) const { return tr::reshape(*this, s); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return tr::transpose(*this, a, b); }
Tensor Tensor::t() const {
  TR_CHECK(dim() <= 2, "t() expects a tensor with <= 2 dimensions, but got ", dim(), "-D of shape ", sizes());
  return dim() < 2 ? *this : transpose(0, 1);
}
Tensor Tensor::permute(const Shape& d) const { return tr::permute(*this, d); }
Tensor Tensor::narrow(int64_t d, int64_t s, int64_t l) const { return tr::narrow(*this, d, s, l); }
Tensor Tensor::slice(int64_t d, int64_t s, int64_t e, int64_t st) const { return tr::slice(*this, d, s, e, st); }
Tensor Tensor::select(int64_t d, int64_t i) const { return tr::select(*this, d, i); }
Tensor Tensor::index(const Tensor& idx) const {
  TR_CHECK(!is_floating(idx.dtype()) && idx.dtype() != DType::Bool, "index: tensors used as indices must be integer "
           "tensors, got ", dtype_name(idx.dtype()));
  Shape out = idx.sizes();
  for (int64_t d = 1; d < dim(); ++d) out.push_back(size(d));
  return index_select(*this, 0, idx.reshape({-1})).view(out);
}
Tensor Tensor::unsqueeze(int64_t d) const { return tr::unsqueeze(*this, d); }
Tensor Tensor::squeeze() const { return tr::squeeze(*this); }
Tensor Tensor::squeeze(int64_t d) const { return tr::squeeze(*this, d); }
Tensor Tensor::expand(const Shape& s) const { return tr::expand(*this, s); }
Tensor Tensor::flatten(int64_t s, int64_t e) const { return tr::flatten(*this, s, e); }
std::vector<Tensor> Tensor::unbind(int64_t d) const { return tr::unbind(*this, d); }
std::vector<Tensor> Tensor::split(int64_t sz, int64_t d) const {
  d = wrap_dim(d, dim(), "split");
  std::vector<Tensor> r;
  for (int64_t s = 0; s < size(d); s += sz) r.push_back(narrow(d, s, std::min(sz, size(d) - s)));
  return r;
}
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t d) const {
  d = wrap_dim(d, dim(), "chunk");
  return split((size(d) + chunks - 1) / chunks, d);
}

// ---- math ----
Tensor Tensor::neg() const { return tr::neg(*this); }
Tensor Tensor::abs() const { return tr::abs(*this); }
Tensor Tensor::sign() const { return tr::sign(*this); }
Tensor Tensor::exp() const { return tr::exp(*this); }
Tensor Tensor::log() const { return tr::log(*this); }
Tensor Tensor::sqrt() const { return tr::sqrt(*this); }
Tensor Tensor::rsqrt() const { return tr::rsqrt(*this); }
Tensor Tensor::tanh() const { return tr::tanh(*this); }
Tensor Tensor::sigmoid() const { return tr::sigmoid(*this); }
Tensor Tensor::relu() const { return tr::relu(*this); }
Tensor Tensor::pow(double e) const { return tr::pow(*this, e); }
Tensor Tensor::pow(const Tensor& e) const { return tr::pow(*this, e); }
Tensor Tensor::clamp(std::optional<double> lo, std::optional<double> hi) const { return tr::clamp(*this, lo, hi); }
Tensor Tensor::sum() const { return tr::sum(*this); }
Tensor Tensor::sum(const Shape& d, bool k) const { return tr::sum(*this, d, k); }
Tensor Tensor::mean() const { return tr::mean(*this); }
Tensor Tensor::mean(const Shape& d, bool k) const { return tr::mean(*this, d, k); }
Tensor Tensor::var(const Shape& d, bool unbiased, bool k) const { return tr::var(*this, d, unbiased ? 1.0 : 0.0, k); }
Tensor Tensor::std(const Shape& d, bool unbiased, bool k) const { return tr::std(*this, d, unbiased ? 1.0 : 0.0, k); }
Tensor Tensor::max() const { return tr::max(*this); }
Tensor Tensor::min() const { return tr::min(*this); }
Tensor Tensor::argmax(std::optional<int64_t> d, bool k) const { return tr::argmax(*this, d, k); }
Tensor Tensor::norm(double p) const { return tr::norm(*this, p); }
Tensor Tensor::matmul(const Tensor& o) const { return tr::matmul(*this, o); }
Tensor Tensor::softmax(int64_t d) const { return tr::softmax(*this, d); }
Tensor Tensor::log_softmax(int64_t d) const { return tr::log_softmax(*this, d); }

// ---- factories ----
Tensor empty(const Shape& shape, TensorOptions opts) {
  for (auto s : shape) TR_CHECK(s >= 0, "empty: negative dimension in shape ", shape);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<StorageImpl>(size_t(numel_of(shape)) * itemsize(opts.dtype_), opts.device_);
  impl->sizes = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = opts.dtype_;
  Tensor t(impl);
  if (opts.requires_grad_) t.requires_grad_(true);
  return t;
}
Tensor empty_strided(const Shape& shape, const Shape& strides, TensorOptions opts) {
  int64_t extent = 1;
  for (size_t i = 0; i < shape.size(); ++i) extent += (shape[i] - 1) * strides[i];
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<StorageImpl>(size_t(extent) * itemsize(opts.dtype_), opts.device_);
  impl->sizes = shape;
  impl->strides = strides;
  impl->dtype = opts.dtype_;
  return Tensor(impl);
}
Tensor full(const Shape& shape, double v, TensorOptions opts) {
  bool rg = opts.requires_grad_;
  Tensor t = empty(shape, opts.requires_grad(false));
  t.fill_(v);
  if (rg) t.requires_grad_(true);
  return t;
}
Tensor zeros(const Shape& shape, TensorOptions opts) { return full(shape, 0.0, opts); }
Tensor ones(const Shape& shape, TensorOptions opts) { return full(shape, 1.0, opts); }
Tensor scalar_tensor(double v, TensorOptions opts) { return full({}, v, opts); }
Tensor empty_like(const Tensor& t) { return empty(t.sizes(), TensorOptions(t.dtype()).device(t.device())); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), TensorOptions(t.dtype()).device(t.device())); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), TensorOptions(t.dtype()).device(t.device())); }
Tensor full_like(const Tensor& t, double v) { return full(t.sizes(), v, TensorOptions(t.dtype()).device(t.device())); }

Tensor from_vector(const std::vector<double>& values, const Shape& shape, TensorOptions opts) {
  TR_CHECK(int64_t(values.size()) == numel_of(shape), "from_vector: ", values.size(), " values do not fill shape ", shape);
  Tensor c = empty(shape, TensorOptions(opts.dtype_));
  TR_DISPATCH_ALL(opts.dtype_, "from_vector", [&] {
    scalar_t* p = c.data_ptr<scalar_t>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<scalar_t>(static_cast<acc_t<scalar_t>>(values[i]));
  });
  Tensor t = opts.device_.is_cpu() ? c : c.to(opts.device_);
  if (opts.requires_grad_) t.requires_grad_(true);
  return t;
}
Tensor tensor(std::initializer_list<double> values, TensorOptions opts) {
  return from_vector(std::vector<double>(values), {int64_t(values.size())}, opts);
}
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, TensorOptions opts) {
  std::vector<double> v;
  int64_t cols = rows.size() ? int64_t(rows.begin()->size()) : 0;
  for (auto& r : rows) {
    TR_CHECK(int64_t(r.size()) == cols, "tensor: rows of unequal length (", r.size(), " vs ", cols, ")");
    v.insert(v.end(), r.begin(), r.end());
  }
  return from_vector(v, {int64_t(rows.size()), cols}, opts);
}
Tensor wrap_scalar(double v, DType like) {
  Tensor t = empty({}, TensorOptions(like));
  TR_DISPATCH_ALL(like, "wrap_scalar", [&] { *t.data_ptr<scalar_t>() = static_cast<scalar_t>(static_cast<acc_t<scalar_t>>(v)); });
  t.impl()->wrapped_number = true;
  return t;
}
Tensor arange(double start, double end, double step, TensorOptions opts) {
  TR_CHECK(step != 0, "arange: step must be nonzero");
  int64_t n = int64_t(std::ceil((end - start) / step));
  n = std::max<int64_t>(n, 0);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = start + double(i) * step;
  return from_vector(v, {n}, opts);
}
Tensor arange(int64_t end, TensorOptions opts) { return arange(0.0, double(end), 1.0, opts); }
Tensor linspace(double start, double end, int64_t steps, TensorOptions opts) {
  std::vector<double> v(static_cast<size_t>(std::max<int64_t>(steps, 0)));
  for (int64_t i = 0; i < steps; ++i) v[i] = steps == 1 ? start : start + (end - start) * double(i) / double(steps - 1);
  return from_vector(v, {steps}, opts);
}

}  // namespace tr
