// Tensor: a strided view (sizes, strides, offset) of a Storage, plus its autograd metadata.
// Copying a Tensor copies the handle; views share storage (and the version counter).
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/storage.h"

namespace tr {

using Shape = std::vector<int64_t>;

class Tensor;
class Node;
class Generator;

struct TensorOptions {
  DType dtype_ = DType::F32;
  Device device_ = Device(DeviceType::CPU, 0);
  bool requires_grad_ = false;

  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d) {}    // NOLINT: zeros({2}, DType::F64)
  TensorOptions(Device d) : device_(d) {}  // NOLINT
  TensorOptions dtype(DType d) const {
    auto o = *this;
    o.dtype_ = d;
    return o;
  }
  TensorOptions device(Device d) const {
    auto o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions requires_grad(bool r = true) const {
    auto o = *this;
    o.requires_grad_ = r;
    return o;
  }
};

using TensorHook = std::function<Tensor(const Tensor&)>;  // returns a replacement gradient or undefined

struct AutogradMeta;
struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& sizes() const;
  const Shape& strides() const;
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t dim() const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  int64_t storage_offset() const;
  bool is_contiguous() const;
  size_t element_size() const { return itemsize(dtype()); }
  bool is_floating_point() const { return is_floating(dtype()); }
  void* raw_data() const;  // address of element 0 (storage base + offset)
  template <typename T> T* data_ptr() const {
    TR_CHECK(dtype_of<std::remove_const_t<T>>::value == dtype(), "data_ptr: tensor has dtype ", dtype_name(dtype()),
             ", requested ", dtype_name(dtype_of<std::remove_const_t<T>>::value));
    return static_cast<T*>(raw_data());
  }
  const Storage& storage() const;
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  uint64_t version() const;
  bool is_wrapped_number() const;

  double item() const;  // the single element as double
  template <typename T> T item() const { return static_cast<T>(item()); }

  // ---- autograd metadata ----
  bool requires_grad() const;
  Tensor& requires_grad_(bool r = true);
  bool is_leaf() const;
  const Tensor& grad() const;  // undefined when none
  void set_grad(const Tensor& g) const;
  const std::shared_ptr<Node>& grad_fn() const;
  uint32_t output_nr() const;
  bool retains_grad() const;
  Tensor detach() const;
  Tensor& detach_();
  AutogradMeta* autograd_meta() const;
  AutogradMeta& mutable_autograd_meta() const;

  // The methods below are PyTorch's method syntax over the op layer and the autograd engine.
  // C++ wants them declared in the class; the floor that owns each defines it (as ATen's
  // TensorBody.h declares methods that ATen defines), so core builds and links without them.

  // ---- autograd (lib/autograd/tensor_autograd.cpp) ----
  void backward(const Tensor& grad_output = Tensor(), bool retain_graph = false, bool create_graph = false) const;
  void retain_grad() const;
  // Hook on the gradient w.r.t. this tensor; may return a replacement. Returns a handle for remove_hook.
  int register_hook(TensorHook hook) const;
  void remove_hook(int handle) const;

  // ---- conversions, copies, views and math (lib/ops/tensor_methods.cpp, lib/ops/inplace.cpp) ----
  std::vector<double> tolist() const;  // all elements in row-major order, as double
  // Sets the gradient to None (set_to_none) or zeros it in place.
  void zero_grad(bool set_to_none = true) const;
  Tensor to(DType t) const;
  Tensor to(Device d) const;
  Tensor to(Device d, DType t) const;
  Tensor cpu() const { return to(kCPU); }
  Tensor clone() const;
  Tensor contiguous() const;
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(double v);
  Tensor& zero_() { return fill_(0.0); }

  // views
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;
  Tensor permute(const Shape& dims) const;
  Tensor narrow(int64_t d, int64_t start, int64_t length) const;
  Tensor slice(int64_t d, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t d, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor index(const Tensor& indices) const;  // x[idx] with an integer tensor: rows along dim 0
  Tensor unsqueeze(int64_t d) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t d) const;
  Tensor expand(const Shape& shape) const;
  Tensor expand_as(const Tensor& o) const { return expand(o.sizes()); }
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  std::vector<Tensor> unbind(int64_t d = 0) const;
  std::vector<Tensor> split(int64_t size, int64_t d = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t d = 0) const;

  // math (ops/ops.h has the full functional list)
  Tensor neg() const;
  Tensor abs() const;
  Tensor sign() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor pow(double e) const;
  Tensor pow(const Tensor& e) const;
  Tensor clamp(std::optional<double> lo, std::optional<double> hi) const;
  Tensor sum() const;
  Tensor sum(const Shape& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  Tensor var(const Shape& dims = {}, bool unbiased = true, bool keepdim = false) const;
  Tensor std(const Shape& dims = {}, bool unbiased = true, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor norm(double p = 2.0) const;
  Tensor matmul(const Tensor& o) const;
  Tensor softmax(int64_t d) const;
  Tensor log_softmax(int64_t d) const;

  // In-place arithmetic: bumps the version counter. Under autograd the result is recorded as
  // this tensor's new history (a leaf that requires grad cannot be modified in place).
  Tensor& add_(const Tensor& o, double alpha = 1.0);
  Tensor& add_(double v);
  Tensor& sub_(const Tensor& o);
  Tensor& mul_(const Tensor& o);
  Tensor& mul_(double v);
  Tensor& div_(const Tensor& o);
  Tensor& div_(double v);

  std::string str() const;  // torch's repr (lib/autograd/print.cpp)

 private:
  std::shared_ptr<TensorImpl> impl_;
};

struct TensorImpl {
  Storage storage;
  Shape sizes;
  Shape strides;
  int64_t offset = 0;
  DType dtype = DType::F32;
  bool wrapped_number = false;  // a C++ scalar promoted to a 0-dim tensor; weak in type promotion
  bool is_view = false;
  std::unique_ptr<AutogradMeta> autograd;
};

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;
  std::shared_ptr<Node> grad_accumulator;  // leaves that require grad: created on first use
  bool retains_grad = false;
  int retain_grad_hook = -1;
};

// ---- allocation (the factories that fill values are ops: ops/factories.h) ----
Tensor empty(const Shape& shape, TensorOptions opts = {});
Tensor empty_strided(const Shape& shape, const Shape& strides, TensorOptions opts = {});
Tensor empty_like(const Tensor& t);
// torch.from_blob: a contiguous CPU tensor over `data`, which `owner` keeps valid (a memory-mapped
// file, a buffer); no copy, no free.
Tensor from_blob(void* data, const Shape& shape, DType dtype, std::shared_ptr<const void> owner);
// The scalar as a 0-dim CPU tensor that does not widen the other operand's dtype (torch's wrapped number).
Tensor wrap_scalar(double v, DType like);

// ---- shape helpers ----
int64_t numel_of(const Shape& s);
Shape contiguous_strides(const Shape& s);
int64_t wrap_dim(int64_t d, int64_t ndim, const char* op);
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
bool compute_contiguous(const Shape& sizes, const Shape& strides);

}  // namespace tr
