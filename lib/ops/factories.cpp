// Tensors filled with values: zeros, ones, full, from host values, ranges.
#include "ops/factories.h"
#include <cmath>
#include "ops/ops.h"

namespace tr {

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
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), TensorOptions(t.dtype()).device(t.device())); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), TensorOptions(t.dtype()).device(t.device())); }
Tensor full_like(const Tensor& t, double v) { return full(t.sizes(), v, TensorOptions(t.dtype()).device(t.device())); }

Tensor from_vector(const std::vector<double>& values, const Shape& shape, TensorOptions opts) {
  TR_CHECK(int64_t(values.size()) == numel_of(shape), "from_vector: ", values.size(), " values do not fill shape ",
           shape);
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
