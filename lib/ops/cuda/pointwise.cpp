// CUDA launchers of the pointwise ops, copy_ and fill_: Tensors -> ElementwiseArgs, then the
// kernels of pointwise_kernels.cu. Same attrs and dtype rules as lib/ops/cpu/pointwise.cpp.
#include "core/cuda/cuda_check.h"
#include "ops/cuda/tensor_args.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::cuda {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

void check_same_dtype(const char* op, const Ins& in, DType t) {
  for (size_t i = 0; i < in.size(); ++i)
    TR_CHECK(in[i].dtype() == t, op, ": input ", i, " has dtype ", dtype_name(in[i].dtype()), ", expected ",
             dtype_name(t));
}

void unary(const char* name, UnaryOp op, const Ins& in, Outs& out, const UnaryParams& p = {}) {
  const DType t = in[0].dtype();
  const bool float_only = int(op) >= int(UnaryOp::Exp);
  if ((float_only && !is_floating(t)) || t == DType::Bool) throw_dtype_unsupported(name, t);
  TR_CHECK(out[0].dtype() == t, name, ": output dtype ", dtype_name(out[0].dtype()), " differs from input dtype ",
           dtype_name(t));
  DeviceGuard g(out[0]);
  for (auto& a : elementwise_args(out[0], {in[0]})) launch_unary(op, t, p, a);
}

void binary(const char* name, BinaryOp op, const Ins& in, Outs& out, double alpha = 1.0) {
  const DType t = out[0].dtype();
  if (t == DType::Bool) throw_dtype_unsupported(name, t);
  check_same_dtype(name, in, t);
  DeviceGuard g(out[0]);
  for (auto& a : elementwise_args(out[0], {in[0], in[1]})) launch_binary(op, t, alpha, a);
}

void compare(const char* name, CompareOp op, const Ins& in, Outs& out) {
  check_same_dtype(name, in, in[0].dtype());
  DeviceGuard g(out[0]);
  for (auto& a : elementwise_args(out[0], {in[0], in[1]})) launch_compare(op, in[0].dtype(), a);
}

void predicate(PredicateOp op, const Ins& in, Outs& out) {
  DeviceGuard g(out[0]);
  for (auto& a : elementwise_args(out[0], {in[0]})) launch_predicate(op, in[0].dtype(), a);
}

// out = in converted to out's dtype (also copy_ between dtypes)
void cast_into(const Tensor& out, const Tensor& in) {
  DeviceGuard g(out);
  if (out.dtype() == in.dtype()) {
    for (auto& a : elementwise_args(out, {in})) launch_copy(out.element_size(), a);
  } else {
    for (auto& a : elementwise_args(out, {in})) launch_cast(out.dtype(), in.dtype(), a);
  }
}

#define TR_CUDA_UNARY(NAME, OP)                                                                         \
  void NAME##_cuda(const Ins& in, Outs& out, const Attrs&) { unary(#NAME, UnaryOp::OP, in, out); } \
  TR_REGISTER_KERNEL(NAME, CUDA, NAME##_cuda);

TR_CUDA_UNARY(neg, Neg)
TR_CUDA_UNARY(abs, Abs)
TR_CUDA_UNARY(sign, Sign)
TR_CUDA_UNARY(relu, Relu)
TR_CUDA_UNARY(exp, Exp)
TR_CUDA_UNARY(log, Log)
TR_CUDA_UNARY(sqrt, Sqrt)
TR_CUDA_UNARY(rsqrt, Rsqrt)
TR_CUDA_UNARY(sin, Sin)
TR_CUDA_UNARY(cos, Cos)
TR_CUDA_UNARY(erf, Erf)
TR_CUDA_UNARY(tanh, Tanh)
TR_CUDA_UNARY(sigmoid, Sigmoid)
TR_CUDA_UNARY(silu, Silu)

void gelu_cuda(const Ins& in, Outs& out, const Attrs& a) {
  unary("gelu", a.s("approximate") == "tanh" ? UnaryOp::GeluTanh : UnaryOp::GeluErf, in, out);
}
TR_REGISTER_KERNEL(gelu, CUDA, gelu_cuda);

void softplus_cuda(const Ins& in, Outs& out, const Attrs& a) {
  unary("softplus", UnaryOp::Softplus, in, out, UnaryParams{a.f("beta"), a.f("threshold"), false, false});
}
TR_REGISTER_KERNEL(softplus, CUDA, softplus_cuda);

void clamp_cuda(const Ins& in, Outs& out, const Attrs& a) {
  unary("clamp", UnaryOp::Clamp, in, out, UnaryParams{a.f("min"), a.f("max"), a.b("has_min"), a.b("has_max")});
}
TR_REGISTER_KERNEL(clamp, CUDA, clamp_cuda);

void add_cuda(const Ins& in, Outs& out, const Attrs& a) { binary("add", BinaryOp::Add, in, out, a.f("alpha")); }
void sub_cuda(const Ins& in, Outs& out, const Attrs& a) { binary("sub", BinaryOp::Sub, in, out, a.f("alpha")); }
void mul_cuda(const Ins& in, Outs& out, const Attrs&) { binary("mul", BinaryOp::Mul, in, out); }
void div_cuda(const Ins& in, Outs& out, const Attrs&) { binary("div", BinaryOp::Div, in, out); }
// a 0-dim exponent takes torch's special cases (sqrt for 0.5, products for 2 and 3), as on the CPU
void pow_cuda(const Ins& in, Outs& out, const Attrs&) {
  binary("pow", in[1].dim() == 0 ? BinaryOp::PowScalar : BinaryOp::Pow, in, out);
}
void maximum_cuda(const Ins& in, Outs& out, const Attrs&) { binary("maximum", BinaryOp::Maximum, in, out); }
void minimum_cuda(const Ins& in, Outs& out, const Attrs&) { binary("minimum", BinaryOp::Minimum, in, out); }
TR_REGISTER_KERNEL(add, CUDA, add_cuda);
TR_REGISTER_KERNEL(sub, CUDA, sub_cuda);
TR_REGISTER_KERNEL(mul, CUDA, mul_cuda);
TR_REGISTER_KERNEL(div, CUDA, div_cuda);
TR_REGISTER_KERNEL(pow, CUDA, pow_cuda);
TR_REGISTER_KERNEL(maximum, CUDA, maximum_cuda);
TR_REGISTER_KERNEL(minimum, CUDA, minimum_cuda);

#define TR_CUDA_COMPARE(NAME, OP)                                                                         \
  void NAME##_cuda(const Ins& in, Outs& out, const Attrs&) { compare(#NAME, CompareOp::OP, in, out); } \
  TR_REGISTER_KERNEL(NAME, CUDA, NAME##_cuda);

TR_CUDA_COMPARE(eq, Eq)
TR_CUDA_COMPARE(ne, Ne)
TR_CUDA_COMPARE(lt, Lt)
TR_CUDA_COMPARE(le, Le)
TR_CUDA_COMPARE(gt, Gt)
TR_CUDA_COMPARE(ge, Ge)

void logical_and_cuda(const Ins& in, Outs& out, const Attrs&) {
  // non-bool inputs count as x != 0, as on the CPU
  Tensor a = in[0].dtype() == DType::Bool ? in[0] : in[0] != wrap_scalar(0, in[0].dtype());
  Tensor b = in[1].dtype() == DType::Bool ? in[1] : in[1] != wrap_scalar(0, in[1].dtype());
  DeviceGuard g(out[0]);
  for (auto& args : elementwise_args(out[0], {a, b})) launch_logical_and(args);
}
TR_REGISTER_KERNEL(logical_and, CUDA, logical_and_cuda);

void logical_not_cuda(const Ins& in, Outs& out, const Attrs&) { predicate(PredicateOp::LogicalNot, in, out); }
void isnan_cuda(const Ins& in, Outs& out, const Attrs&) { predicate(PredicateOp::IsNan, in, out); }
void isfinite_cuda(const Ins& in, Outs& out, const Attrs&) { predicate(PredicateOp::IsFinite, in, out); }
TR_REGISTER_KERNEL(logical_not, CUDA, logical_not_cuda);
TR_REGISTER_KERNEL(isnan, CUDA, isnan_cuda);
TR_REGISTER_KERNEL(isfinite, CUDA, isfinite_cuda);

void where_cuda(const Ins& in, Outs& out, const Attrs&) {
  TR_CHECK(in[0].dtype() == DType::Bool, "where: condition must be bool, got ", dtype_name(in[0].dtype()));
  check_same_dtype("where", {in[1], in[2]}, out[0].dtype());
  DeviceGuard g(out[0]);
  for (auto& a : elementwise_args(out[0], {in[0], in[1], in[2]})) launch_where(out[0].element_size(), a);
}
TR_REGISTER_KERNEL(where, CUDA, where_cuda);

void cast_cuda(const Ins& in, Outs& out, const Attrs&) { cast_into(out[0], in[0]); }
TR_REGISTER_KERNEL(cast, CUDA, cast_cuda);

// copy_(dst, src): inputs {dst, src}, no outputs; src broadcasts to dst, dst may be strided.
void copy_cuda(const Ins& in, Outs&, const Attrs&) {
  const Tensor &dst = in[0], &src = in[1];
  if (dst.numel() == 0) return;
  if (dst.dtype() == src.dtype() && src.device() == dst.device() && src.sizes() == dst.sizes() &&
      dst.is_contiguous() && src.is_contiguous()) {
    DeviceGuard g(dst);
    TR_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), size_t(dst.numel()) * dst.element_size(),
                                  cudaMemcpyDeviceToDevice, 0));
    return;
  }
  cast_into(dst, src);
}
TR_REGISTER_KERNEL(copy_, CUDA, copy_cuda);

// fill_(dst): dst = value converted to dst's dtype (a copy from a host scalar).
void fill_cuda(const Ins& in, Outs&, const Attrs& a) {
  const Tensor& dst = in[0];
  const uint64_t bits = value_bits(a.f("value"), dst.dtype());
  DeviceGuard g(dst);
  if (bits == 0 && dst.is_contiguous()) {
    TR_CUDA_CHECK(cudaMemsetAsync(dst.raw_data(), 0, size_t(dst.numel()) * dst.element_size(), 0));
    return;
  }
  for (auto& args : elementwise_args(dst, {})) {
    args.nops = 2;  // input 1: the value, as a host scalar (ptr null, strides 0)
    args.scalar[1] = bits;
    launch_copy(dst.element_size(), args);
  }
}
TR_REGISTER_KERNEL(fill_, CUDA, fill_cuda);

}  // namespace

}  // namespace tr::cuda
