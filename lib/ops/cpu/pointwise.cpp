// CPU kernels of the pointwise ops: out = f(in...) elementwise with broadcasting. The table ops
// (ops/*_ops.def) expand into name_forward_cpu; where, cast, copy_, fill_ and the rest are below.
#include <cstring>
#include "ops/cpu/loops.h"
#include "ops/cpu/vec_math.h"
#include "ops/op_tables.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "ops/scalar_math.h"

namespace tr::cpu {

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  Shape r(shape.size(), 0);
  int64_t off = int64_t(shape.size()) - t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) r[d + off] = t.size(d) == 1 ? 0 : t.stride(d);
  return r;
}

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

// The f32x8 column of a unary op without an 8-lane function.
struct NoVec8 {};
constexpr NoVec8 no_vec8{};

// y = f8(x) on f32 contiguous tensors through glibc's vectorised functions (vec_math.h); false
// (the scalar loop runs) for other dtypes and layouts, and for ops without an f8.
template <typename F8> bool map_f32x8_if(const Tensor& in, const Tensor& out, const F8& f8) {
  if (vec_bf16_ok(in, out)) {  // widened, the f32 lanes' function, rounded once
    map_x8(static_cast<uint16_t*>(out.raw_data()), in.numel(), f8, static_cast<const uint16_t*>(in.raw_data()));
    return true;
  }
  if (!vec_f32_ok(in, out)) return false;
  map_x8(out.data_ptr<float>(), in.numel(), f8, in.data_ptr<float>());
  return true;
}
bool map_f32x8_if(const Tensor&, const Tensor&, NoVec8) { return false; }

// The params of a table line (PointwiseParams p) as its formula sees them: p0, p1 in the compute
// type A, b0, b1 as they are; captured by the loop body only where the formula uses them.
#define TR_CPU_FORMULA_PARAMS                          \
  [[maybe_unused]] const A p0 = A(p.p0), p1 = A(p.p1); \
  [[maybe_unused]] const bool b0 = p.b0, b1 = p.b1;

// unary_ops.def: y = formula(x) computed in A = acc_t<dtype> over the op's dtypes; params read
// once, before the loop.
#define TR_UNARY_OP(NAME, OP, DTYPES, AUTOCAST, PARAMS, FORMULA, F32X8)   \
  void NAME##_forward_cpu(const Ins& in, Outs& out, const Attrs& a) {     \
    if (map_f32x8_if(in[0], out[0], F32X8)) return;                       \
    const PointwiseParams p{TR_UNPAREN PARAMS};                           \
    TR_DISPATCH_##DTYPES(in[0].dtype(), #NAME, [&] {                      \
      using A = acc_t<scalar_t>;                                          \
      TR_CPU_FORMULA_PARAMS                                               \
      elementwise<scalar_t, scalar_t>(out[0], {in[0]}, [=](scalar_t xs) { \
        A x = A(xs);                                                      \
        return scalar_t(FORMULA);                                         \
      });                                                                 \
    });                                                                   \
  }                                                                       \
  TR_REGISTER_KERNEL(NAME, CPU, NAME##_forward_cpu);
#include "ops/unary_ops.def"

// binary_ops.def: y = formula(x, y) computed in A = acc_t<dtype> over the op's dtypes (of the
// output: the inputs are promoted to it); params read once, before the loop.
#define TR_BINARY_OP(NAME, OP, DTYPES, AUTOCAST, PARAMS, FORMULA)                                       \
  void NAME##_forward_cpu(const Ins& in, Outs& out, const Attrs& a) {                                   \
    const PointwiseParams p{TR_UNPAREN PARAMS};                                                         \
    TR_DISPATCH_##DTYPES(out[0].dtype(), #NAME, [&] {                                                   \
      using A = acc_t<scalar_t>;                                                                        \
      TR_CPU_FORMULA_PARAMS                                                                             \
      elementwise<scalar_t, scalar_t, scalar_t>(out[0], {in[0], in[1]}, [=](scalar_t as, scalar_t bs) { \
        A x = A(as), y = A(bs);                                                                         \
        return scalar_t(FORMULA);                                                                       \
      });                                                                                               \
    });                                                                                                 \
  }                                                                                                     \
  TR_REGISTER_KERNEL(NAME, CPU, NAME##_forward_cpu);
#include "ops/binary_ops.def"

// compare_ops.def: bool y = x0 OPERATOR x1 in acc_t of the (common) input dtype.
#define TR_COMPARE_OP(NAME, OP, OPERATOR)                                                               \
  void NAME##_forward_cpu(const Ins& in, Outs& out, const Attrs&) {                                     \
    TR_DISPATCH_ALL(in[0].dtype(), #NAME, [&] {                                                         \
      using A = acc_t<scalar_t>;                                                                        \
      elementwise<bool, scalar_t, scalar_t>(out[0], {in[0], in[1]},                                     \
                                            [](scalar_t a, scalar_t b) { return A(a) OPERATOR A(b); }); \
    });                                                                                                 \
  }                                                                                                     \
  TR_REGISTER_KERNEL(NAME, CPU, NAME##_forward_cpu);
#include "ops/compare_ops.def"

// predicate_ops.def: bool y = formula(x), x in acc_t of the input dtype.
#define TR_PREDICATE_OP(NAME, OP, FORMULA)                           \
  void NAME##_forward_cpu(const Ins& in, Outs& out, const Attrs&) {  \
    TR_DISPATCH_ALL(in[0].dtype(), #NAME, [&] {                      \
      using A = acc_t<scalar_t>;                                     \
      elementwise<bool, scalar_t>(out[0], {in[0]}, [](scalar_t xs) { \
        A x = A(xs);                                                 \
        return bool(FORMULA);                                        \
      });                                                            \
    });                                                              \
  }                                                                  \
  TR_REGISTER_KERNEL(NAME, CPU, NAME##_forward_cpu);
#include "ops/predicate_ops.def"

// g where y > threshold, else 0 (relu's backward; inputs {g, y} of one dtype)
void threshold_backward_cpu(const Ins& in, Outs& out, const Attrs& attrs) {
  TR_DISPATCH_NUMERIC(out[0].dtype(), "threshold_backward", [&] {
    using A = acc_t<scalar_t>;
    const A th = A(attrs.f("threshold"));
    elementwise<scalar_t, scalar_t, scalar_t>(out[0], {in[0], in[1]}, [=](scalar_t gs, scalar_t ys) {
      return scalar_t(math::threshold_backward(A(gs), A(ys), th));
    });
  });
}
TR_REGISTER_KERNEL(threshold_backward, CPU, threshold_backward_cpu);

// g gelu'(x) (gelu's backward; inputs {g, x} of one dtype). Contiguous f32 or bf16 of one shape: 8 lanes
// with libmvec's erf, exp and tanh; otherwise the scalar formula.
void gelu_backward_cpu(const Ins& in, Outs& out, const Attrs& attrs) {
  const bool tanh_form = attrs.s("approximate") == "tanh";
  const Tensor &g = in[0], &x = in[1], &y = out[0];
  auto f8 = [tanh_form](__m256 gv, __m256 xv) { return gelu_backward8(gv, xv, tanh_form); };
  if (vec_f32_ok(x, y) && vec_f32_ok(g, y)) {
    map_x8(y.data_ptr<float>(), y.numel(), f8, g.data_ptr<float>(), x.data_ptr<float>());
    return;
  }
  if (vec_bf16_ok(x, y) && vec_bf16_ok(g, y)) {  // bf16: widened, the f32 lanes, rounded once
    map_x8(static_cast<uint16_t*>(y.raw_data()), y.numel(), f8, static_cast<const uint16_t*>(g.raw_data()),
           static_cast<const uint16_t*>(x.raw_data()));
    return;
  }
  TR_DISPATCH_FLOAT(y.dtype(), "gelu_backward", [&] {
    using A = acc_t<scalar_t>;
    elementwise<scalar_t, scalar_t, scalar_t>(y, {g, x}, [=](scalar_t gs, scalar_t xs) {
      return scalar_t(tanh_form ? math::gelu_backward_tanh(A(gs), A(xs)) : math::gelu_backward_erf(A(gs), A(xs)));
    });
  });
}
TR_REGISTER_KERNEL(gelu_backward, CPU, gelu_backward_cpu);

void logical_and_cpu(const Ins& in, Outs& out, const Attrs&) {
  Tensor a = in[0].dtype() == DType::Bool ? in[0] : in[0] != wrap_scalar(0, in[0].dtype());
  Tensor b = in[1].dtype() == DType::Bool ? in[1] : in[1] != wrap_scalar(0, in[1].dtype());
  elementwise<bool, bool, bool>(out[0], {a, b}, [](bool x, bool y) { return x && y; });
}
TR_REGISTER_KERNEL(logical_and, CPU, logical_and_cpu);
void where_cpu(const Ins& in, Outs& out, const Attrs&) {
  TR_DISPATCH_ALL(out[0].dtype(), "where", [&] {
    elementwise<scalar_t, bool, scalar_t, scalar_t>(out[0], {in[0], in[1], in[2]},
                                                    [](bool c, scalar_t a, scalar_t b) { return c ? a : b; });
  });
}
TR_REGISTER_KERNEL(where, CPU, where_cpu);

// out = in converted to out's dtype (also the body of copy_ between dtypes)
// n elements f32 -> bf16 (rounded to nearest even) or bf16 -> f32 (exact), 8 lanes at a time: the
// same bits as the scalar conversions of core/half.h
void convert_run(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store_bf16x8(y + i, _mm256_loadu_ps(x + i));
  for (; i < n; ++i) y[i] = float_to_bf16_bits(x[i]);
}
void convert_run(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load_bf16x8(x + i));
  for (; i < n; ++i) y[i] = bf16_bits_to_float(x[i]);
}

// out (contiguous) = in converted, where in's last dim is dense (stride 1): row by row through
// convert_run, a contiguous input as one long run. Covers autocast's casts and the widening of
// bf16 matmul operands (narrowed and transposed views included, matmul.cpp).
template <typename I, typename O> void convert_rows(const Tensor& out, const Tensor& in) {
  const I* x = static_cast<const I*>(in.raw_data());
  O* y = static_cast<O*>(out.raw_data());
  if (in.is_contiguous()) {
    parallel_for(in.numel(), kGrain, [&](int64_t b, int64_t e) { convert_run(x + b, y + b, e - b); });
    return;
  }
  const int64_t len = in.size(-1), rows = in.numel() / std::max<int64_t>(len, 1), nd = in.dim();
  parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(len, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t off = 0, rest = r;
      for (int64_t d = nd - 2; d >= 0; --d) {
        off += (rest % in.size(d)) * in.stride(d);
        rest /= in.size(d);
      }
      convert_run(x + off, y + r * len, len);
    }
  });
}

void cast_into(const Tensor& out, const Tensor& in) {
  if (out.is_contiguous() && in.sizes() == out.sizes() && in.dim() > 0 && (in.stride(-1) == 1 || in.size(-1) == 1) &&
      in.numel() > 0) {
    if (in.dtype() == DType::F32 && out.dtype() == DType::BF16) return convert_rows<float, uint16_t>(out, in);
    if (in.dtype() == DType::BF16 && out.dtype() == DType::F32) return convert_rows<uint16_t, float>(out, in);
  }
  TR_DISPATCH_ALL(out.dtype(), "cast", [&] {
    using O = scalar_t;
    TR_DISPATCH_ALL(in.dtype(), "cast",
                    [&] { elementwise<O, scalar_t>(out, {in}, [](scalar_t x) { return convert<O>(x); }); });
  });
}
void cast_cpu(const Ins& in, Outs& out, const Attrs&) { cast_into(out[0], in[0]); }
TR_REGISTER_KERNEL(cast, CPU, cast_cpu);

// copy_(dst, src): inputs {dst, src}, no outputs; src broadcasts to dst.
void copy_cpu(const Ins& in, Outs&, const Attrs&) {
  const Tensor &dst = in[0], &src = in[1];
  if (dst.dtype() == src.dtype()) {
    TR_DISPATCH_ALL(dst.dtype(), "copy_",
                    [&] { elementwise<scalar_t, scalar_t>(dst, {src}, [](scalar_t x) { return x; }); });
  } else {
    cast_into(dst, src);
  }
}
TR_REGISTER_KERNEL(copy_, CPU, copy_cpu);

void fill_cpu(const Ins& in, Outs&, const Attrs& a) {
  const Tensor& dst = in[0];
  double v = a.f("value");
  TR_DISPATCH_ALL(dst.dtype(), "fill_", [&] {
    scalar_t s = convert<scalar_t>(v);
    if (dst.is_contiguous()) {
      scalar_t* p = dst.data_ptr<scalar_t>();
      parallel_for(dst.numel(), kGrain, [&](int64_t b, int64_t e) { std::fill(p + b, p + e, s); });
    } else {
      elementwise<scalar_t>(dst, {}, [s]() { return s; });
    }
  });
}
TR_REGISTER_KERNEL(fill_, CPU, fill_cpu);

}  // namespace
}  // namespace tr::cpu
