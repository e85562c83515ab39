// Random tensors from Philox streams: element i of a draw is a pure function of
// (seed, offset, i), so results do not depend on thread count or device.
#include "core/grad_mode.h"
#include "core/philox.h"
#include "ops/infer.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

namespace {
Generator& gen_or_default(Generator* g) { return g ? *g : default_generator(); }

Attrs stream_attrs(Generator* g, int64_t n, Attrs a) {
  GeneratorState s = gen_or_default(g).reserve(uint64_t(n));
  a.set("seed", int64_t(s.seed));
  a.set("offset", int64_t(s.offset));
  return a;
}
}  // namespace

// In place: x[i] = low + (high - low) * U_i
TR_REGISTER_OP(uniform_) {
  d.num_inputs = 1;
  d.infer = no_outputs;
  d.differentiable = false;
}
// In place: x[i] = mean + std * N_i
TR_REGISTER_OP(normal_) {
  d.num_inputs = 1;
  d.infer = no_outputs;
  d.differentiable = false;
}
// out[i] = (U_i >= p) / (1 - p): the inverted-dropout keep mask
TR_REGISTER_OP(dropout_mask) {
  d.num_inputs = 1;
  d.save_inputs = false;
  d.differentiable = false;
  d.infer = infer_same;
}

Tensor rand(const Shape& shape, TensorOptions opts, Generator* gen) {
  TR_CHECK(is_floating(opts.dtype_), "rand: dtype must be floating point, got ", dtype_name(opts.dtype_));
  Tensor t = empty(shape, opts.requires_grad(false));
  dispatch("uniform_", {t}, stream_attrs(gen, t.numel(), {{"low", 0.0}, {"high", 1.0}}));
  if (opts.requires_grad_) t.requires_grad_(true);
  return t;
}
Tensor randn(const Shape& shape, TensorOptions opts, Generator* gen) {
  TR_CHECK(is_floating(opts.dtype_), "randn: dtype must be floating point, got ", dtype_name(opts.dtype_));
  Tensor t = empty(shape, opts.requires_grad(false));
  dispatch("normal_", {t}, stream_attrs(gen, t.numel(), {{"mean", 0.0}, {"std", 1.0}}));
  if (opts.requires_grad_) t.requires_grad_(true);
  return t;
}
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opts, Generator* gen) {
  TR_CHECK(high > low, "randint: expected high > low, got low=", low, " high=", high);
  NoGradGuard ng;
  Tensor u = rand(shape, TensorOptions(DType::F64).device(opts.device_), gen);
  Tensor r = u * double(high - low) + double(low);
  return cast(minimum(r, wrap_scalar(double(high) - 0.5, DType::F64)), DType::F64).to(DType::I64).to(opts.dtype_);
}
Tensor randperm(int64_t n, Generator* gen) {
  // Fisher-Yates driven by one Philox stream.
  GeneratorState s = gen_or_default(gen).reserve(uint64_t(n));
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double(i);
  for (int64_t i = n - 1; i > 0; --i) {
    double u = philox_uniform_at(s.seed, s.offset, uint64_t(i));
    int64_t j = std::min<int64_t>(int64_t(u * double(i + 1)), i);
    std::swap(v[size_t(i)], v[size_t(j)]);
  }
  return from_vector(v, {n}, DType::I64);
}
Tensor dropout_mask(const Tensor& like, double p, Generator* gen) {
  TR_CHECK(p >= 0.0 && p < 1.0, "dropout: probability has to be in [0, 1), but got ", p);
  return dispatch1("dropout_mask", {like.detach()}, stream_attrs(gen, like.numel(), {{"p", p}}));
}
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * 0.0;
  return x * dropout_mask(x, p, gen);
}

}  // namespace tr
