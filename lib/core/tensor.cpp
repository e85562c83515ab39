#include "core/tensor.h"
#include <cmath>
#include <cstring>
#include "core/grad_mode.h"
#include "core/cuda_hooks.h"

namespace tr {

// ---- shape helpers ----
int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (auto v : s) n *= v;
  return n;
}

// (Checked: the strides of a shape with a zero-size dimension do not bound its other sizes, so a
// shape such as [0, 2^32, 2^32, 2^32] would overflow here while numel() is 0.)
Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (int64_t i = int64_t(s.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    TR_CHECK(!__builtin_mul_overflow(acc, std::max<int64_t>(s[i], 1), &acc), "shape ", s,
             " is too large: its strides exceed int64");
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
    TR_CHECK(x == y || x == 1 || y == 1, op, *op ? ": " : "", "shapes ", a, " and ", b, " are not broadcastable (size ",
             x, " vs ", y, " at dimension ", i, ")");
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
  // one element, copied to the host when it lives on a device
  alignas(8) unsigned char bytes[8];
  cuda::memcpy(bytes, kCPU, raw_data(), device(), element_size());
  double v = 0;
  TR_DISPATCH_ALL(dtype(), "item",
                  [&] { v = double(static_cast<acc_t<scalar_t>>(*reinterpret_cast<const scalar_t*>(bytes))); });
  return v;
}

// ---- autograd metadata ----
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
  TR_CHECK(!r || is_floating(dtype()),
           "requires_grad_: only tensors of floating point dtype can require gradients (got ", dtype_name(dtype()),
           ")");
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
    TR_CHECK(g.sizes() == sizes(), "set_grad: assigned grad has shape ", g.sizes(), " but the tensor has shape ",
             sizes());
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
// ---- allocation ----
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
Tensor empty_like(const Tensor& t) { return empty(t.sizes(), TensorOptions(t.dtype()).device(t.device())); }
Tensor from_blob(void* data, const Shape& shape, DType dtype, std::shared_ptr<const void> owner) {
  for (auto s : shape) TR_CHECK(s >= 0, "from_blob: negative dimension in shape ", shape);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage =
      std::make_shared<StorageImpl>(data, size_t(numel_of(shape)) * itemsize(dtype), kCPU, std::move(owner));
  impl->sizes = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(impl);
}
Tensor wrap_scalar(double v, DType like) {
  Tensor t = empty({}, TensorOptions(like));
  TR_DISPATCH_ALL(like, "wrap_scalar",
                  [&] { *t.data_ptr<scalar_t>() = static_cast<scalar_t>(static_cast<acc_t<scalar_t>>(v)); });
  t.impl()->wrapped_number = true;
  return t;
}

}  // namespace tr
