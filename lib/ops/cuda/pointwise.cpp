// CUDA launchers of the pointwise ops, copy_ and fill_: Tensors -> ElementwiseArgs, then the
// kernels of pointwise_kernels.cu. The table ops (ops/*_ops.def) expand into name_forward_cuda,
// with the same attrs and dtype rules as their CPU kernels (lib/ops/cpu/pointwise.cpp).
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

// Bool never; FLOAT ops only floating dtypes (what the CPU's TR_DISPATCH_<set> accepts).
void check_dtype_set(const char* name, DtypeSet s, DType t) {
  if ((s == DtypeSet::FLOAT && !is_floating(t)) || t == DType::Bool) throw_dtype_unsupported(name, t);
}

void unary(const char* name, UnaryOp op, DtypeSet s, const Ins& in, Outs& out, const PointwiseParams& p) {
  const DType t = in[0].dtype();
  check_dtype_set(name, s, t);
  TR_CHECK(out[0].dtype() == t, name, ": output dtype ", dtype_name(out[0].dtype()), " differs from input dtype ",
           dtype_name(t));
  DeviceGuard g(out[0]);
  for (auto& a : elementwise_args(out[0], {in[0]})) launch_unary(op, t, p, a);
}

void binary(const char* name, BinaryOp op, DtypeSet s, const Ins& in, Outs& out, const PointwiseParams& p) {
  const DType t = out[0].dtype();
  check_dtype_set(name, s, t);
  DeviceGuard g(out[0]);
  if (in[0].dtype() != in[1].dtype()) {  // f32 beside f16 / bf16 (OpDef::cuda_reads_mixed_floats)
    const auto f32_or_16bit = [](DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; };
    TR_CHECK(t == DType::F32 && f32_or_16bit(in[0].dtype()) && f32_or_16bit(in[1].dtype()), name, ": mixed inputs ",
             dtype_name(in[0].dtype()), " and ", dtype_name(in[1].dtype()),
             " must be float32 beside float16 or bfloat16");
    for (auto& a : elementwise_args(out[0], {in[0], in[1]}))
      launch_binary_mixed(op, in[0].dtype(), in[1].dtype(), p, a);
    return;
  }
  check_same_dtype(name, in, t);
  for (auto& a : elementwise_args(out[0], {in[0], in[1]})) launch_binary(op, t, p, a);
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

// The table ops: params read from attrs `a` (and inputs `in`) on the host, as on the CPU.
#define TR_UNARY_OP(NAME, OP, DTYPES, AUTOCAST, PARAMS, FORMULA, F32X8)                       \
  void NAME##_forward_cuda(const Ins& in, Outs& out, const Attrs& a) {                        \
    unary(#NAME, UnaryOp::OP, DtypeSet::DTYPES, in, out, PointwiseParams{TR_UNPAREN PARAMS}); \
  }                                                                                           \
  TR_REGISTER_KERNEL(NAME, CUDA, NAME##_forward_cuda);
#include "ops/unary_ops.def"
#define TR_BINARY_OP(NAME, OP, DTYPES, AUTOCAST, PARAMS, FORMULA)                               \
  void NAME##_forward_cuda(const Ins& in, Outs& out, const Attrs& a) {                          \
    binary(#NAME, BinaryOp::OP, DtypeSet::DTYPES, in, out, PointwiseParams{TR_UNPAREN PARAMS}); \
  }                                                                                             \
  TR_REGISTER_KERNEL(NAME, CUDA, NAME##_forward_cuda);
#include "ops/binary_ops.def"
#define TR_COMPARE_OP(NAME, OP, OPERATOR)                                                                      \
  void NAME##_forward_cuda(const Ins& in, Outs& out, const Attrs&) { compare(#NAME, CompareOp::OP, in, out); } \
  TR_REGISTER_KERNEL(NAME, CUDA, NAME##_forward_cuda);
#include "ops/compare_ops.def"
#define TR_PREDICATE_OP(NAME, OP, FORMULA)                                                                  \
  void NAME##_forward_cuda(const Ins& in, Outs& out, const Attrs&) { predicate(PredicateOp::OP, in, out); } \
  TR_REGISTER_KERNEL(NAME, CUDA, NAME##_forward_cuda);
#include "ops/predicate_ops.def"

void logical_and_cuda(const Ins& in, Outs& out, const Attrs&) {
  // non-bool inputs count as x != 0, as on the CPU
  Tensor a = in[0].dtype() == DType::Bool ? in[0] : in[0] != wrap_scalar(0, in[0].dtype());
  Tensor b = in[1].dtype() == DType::Bool ? in[1] : in[1] != wrap_scalar(0, in[1].dtype());
  DeviceGuard g(out[0]);
  for (auto& args : elementwise_args(out[0], {a, b})) launch_logical_and(args);
}
TR_REGISTER_KERNEL(logical_and, CUDA, logical_and_cuda);

// g where y > threshold, else 0 (inputs {g, y} of one dtype)
void threshold_backward_cuda(const Ins& in, Outs& out, const Attrs& attrs) {
  check_same_dtype("threshold_backward", {in[0], in[1]}, out[0].dtype());
  DeviceGuard g(out[0]);
  for (auto& a : elementwise_args(out[0], {in[0], in[1]}))
    launch_threshold_backward(out[0].dtype(), attrs.f("threshold"), a);
}
TR_REGISTER_KERNEL(threshold_backward, CUDA, threshold_backward_cuda);

// g gelu'(x) (inputs {g, x} of one float dtype)
void gelu_backward_cuda(const Ins& in, Outs& out, const Attrs& attrs) {
  check_same_dtype("gelu_backward", {in[0], in[1]}, out[0].dtype());
  DeviceGuard g(out[0]);
  for (auto& a : elementwise_args(out[0], {in[0], in[1]}))
    launch_gelu_backward(out[0].dtype(), attrs.s("approximate") == "tanh", a);
}
TR_REGISTER_KERNEL(gelu_backward, CUDA, gelu_backward_cuda);

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
  if (dst.dtype() == src.dtype() && src.device() == dst.device() && src.sizes() == dst.sizes() && dst.is_contiguous() &&
      src.is_contiguous()) {
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
