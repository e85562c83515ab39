// Tensor's conversion, view and math methods (declared in core/tensor.h): PyTorch's method
// syntax over the functional ops of ops.h.
#include <algorithm>
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

std::vector<double> Tensor::tolist() const {
  Tensor c = to(kCPU, DType::F64).contiguous();
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
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

Tensor Tensor::to(Device d, DType t) const {
  if (d == device()) return to(t);
  const Device src = device();
  Tensor moved = dispatch1("_to_copy", {*this},
                           {{"dst_type", int64_t(d.type)},
                            {"dst_index", int64_t(d.index)},
                            {"src_type", int64_t(src.type)},
                            {"src_index", int64_t(src.index)}});
  return moved.to(t);
}
Tensor Tensor::clone() const { return tr::clone(*this); }
Tensor Tensor::contiguous() const { return is_contiguous() ? *this : tr::contiguous(*this); }

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
  TR_CHECK(!is_floating(idx.dtype()) && idx.dtype() != DType::Bool,
           "index: tensors used as indices must be integer "
           "tensors, got ",
           dtype_name(idx.dtype()));
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

}  // namespace tr
