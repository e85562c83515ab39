// Matrix products: mm (2-D) and bmm (3-D) are kernels; matmul composes them. linear is the fused
// addmm (bias + x W^T in one kernel: the bias, and a relu after it, as the product's epilogue) where
// the device has it and fusion is on, else the composite matmul + add (+ relu), its spec.
#include "core/grad_mode.h"
#include "ops/autocast.h"
#include "ops/backends.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

namespace {

// m is the transpose of a contiguous matrix (m.t() is contiguous), e.g. a weight seen as W^T.
bool is_transposed_matrix(const Tensor& m) {
  return m.dim() == 2 && m.size(0) > 1 && m.size(1) > 1 && m.stride(0) == 1 && m.stride(1) == m.size(0);
}

// C = A B: dA = dC B^T, dB = A^T dC. A gradient is computed in its input's layout: for B = W^T
// (linear's weight), dB = (dC^T A)^T, so that dW arrives contiguous and is not copied again.
std::vector<Tensor> mm_backward(const Tensor& a, const Tensor& b, const Tensor& g, bool need_a, bool need_b) {
  Tensor ga, gb;
  if (need_a) ga = is_transposed_matrix(a) ? mm(b, g.t()).t() : mm(g, b.t());
  if (need_b) gb = is_transposed_matrix(b) ? mm(g.t(), a).t() : mm(a.t(), g);
  return {ga, gb};
}

// Whether addmm's backward takes the weight and bias gradients from addmm_backward_weight_bias
// (one kernel on CUDA, the bias gradient in the weight gradient's GEMM): both wanted, b = W^T as
// linear passes it, fusion on, the device has the kernel, no graph of the gradient wanted (the op
// is not differentiable; with create_graph the composite runs).
bool fused_weight_bias_grad(const BackwardContext& c, const Tensor& g) {
  const Tensor &a = c.inputs[1], &b = c.inputs[2];
  return c.needs_input_grad[0] && c.needs_input_grad[2] && !GradMode::is_enabled() && backends::fusion().enabled &&
         is_transposed_matrix(b) && g.dtype() == a.dtype() && has_kernel("addmm_backward_weight_bias", g.device());
}

// addmm's gradients from g, the gradient of bias + a b (after the relu mask, for addmm_relu)
std::vector<Tensor> addmm_backward(const BackwardContext& c, const Tensor& g) {
  if (fused_weight_bias_grad(c, g)) {
    std::vector<Tensor> wb = dispatch("addmm_backward_weight_bias", {g, c.inputs[1]});
    Tensor ga = c.needs_input_grad[1] ? mm_backward(c.inputs[1], c.inputs[2], g, true, false)[0] : Tensor();
    return {wb[1], ga, wb[0].t()};
  }
  std::vector<Tensor> r = mm_backward(c.inputs[1], c.inputs[2], g, c.needs_input_grad[1], c.needs_input_grad[2]);
  return {c.needs_input_grad[0] ? sum_to(g, c.input_specs[0].sizes) : Tensor(), r[0], r[1]};
}

}  // namespace

TR_REGISTER_OP(mm) {
  d.autocast = amp::CastPolicy::LowerPrecision;
  d.flops = [](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs&) {
    return 2.0 * double(out[0].numel()) * double(in[0].size(1));
  };
  d.num_inputs = 2;
  d.promote = Promote::Common;
  d.infer = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<TensorSpec> {
    const Tensor &a = in[0], &b = in[1];
    TR_CHECK(a.dim() == 2 && b.dim() == 2, "mm: expected 2-D tensors, got shapes ", a.sizes(), " and ", b.sizes());
    TR_CHECK(a.size(1) == b.size(0), "mm: mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(1),
             " and ", b.size(0), "x", b.size(1), ")");
    return {{{a.size(0), b.size(1)}, a.dtype()}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    return mm_backward(c.inputs[0], c.inputs[1], c.grads[0], c.needs_input_grad[0], c.needs_input_grad[1]);
  };
}

TR_REGISTER_OP(bmm) {
  d.autocast = amp::CastPolicy::LowerPrecision;
  d.flops = [](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs&) {
    return 2.0 * double(out[0].numel()) * double(in[0].size(2));
  };
  d.num_inputs = 2;
  d.promote = Promote::Common;
  d.infer = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<TensorSpec> {
    const Tensor &a = in[0], &b = in[1];
    TR_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expected 3-D tensors, got shapes ", a.sizes(), " and ", b.sizes());
    TR_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), "bmm: shapes ", a.sizes(), " and ", b.sizes(),
             " cannot be multiplied (batch sizes must match and mat1.size(2) must equal mat2.size(1))");
    return {{{a.size(0), a.size(1), b.size(2)}, a.dtype()}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    Tensor ga, gb;
    if (c.needs_input_grad[0]) ga = bmm(c.grads[0], c.inputs[1].transpose(1, 2));
    if (c.needs_input_grad[1]) gb = bmm(c.inputs[0].transpose(1, 2), c.grads[0]);
    return {ga, gb};
  };
}

namespace {

// addmm (bias [N], mat1 [M, K], mat2 [K, N]) -> bias + mat1 mat2, torch.addmm with beta = alpha = 1
// and a 1-D bias; addmm_relu -> relu of that (torch._addmm_activation). The bias gradient is the
// composite's sum_to, the products' gradients mm's.
void def_addmm(OpDef& d, bool relu) {
  d.autocast = amp::CastPolicy::LowerPrecision;
  d.flops = [](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs&) {
    return 2.0 * double(out[0].numel()) * double(in[1].size(1));
  };
  d.num_inputs = 3;
  d.promote = Promote::Common;
  d.save_outputs = relu;  // the relu mask
  d.grad_name = relu ? "AddmmActivationBackward0" : "AddmmBackward0";
  d.infer = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<TensorSpec> {
    const Tensor &bias = in[0], &a = in[1], &b = in[2];
    TR_CHECK(a.dim() == 2 && b.dim() == 2, "addmm: expected 2-D matrices, got shapes ", a.sizes(), " and ", b.sizes());
    TR_CHECK(a.size(1) == b.size(0), "addmm: mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(1),
             " and ", b.size(0), "x", b.size(1), ")");
    TR_CHECK(bias.dim() == 1 && bias.size(0) == b.size(1), "addmm: expected a bias of shape [", b.size(1), "], got ",
             bias.sizes());
    return {{{a.size(0), b.size(1)}, a.dtype()}};
  };
  d.backward = relu ? [](const BackwardContext&
                             c) { return addmm_backward(c, threshold_backward(c.grads[0], c.outputs[0], 0.0)); }
                    : [](const BackwardContext& c) { return addmm_backward(c, c.grads[0]); };
}

}  // namespace

TR_REGISTER_OP(addmm) { def_addmm(d, false); }
TR_REGISTER_OP(addmm_relu) { def_addmm(d, true); }

// addmm_backward_weight_bias (g [M, N], mat1 [M, K]) -> (g^T mat1 [N, K], the column sums of g [N]):
// linear's weight and bias gradients, W = mat2^T. The composite's mm and sum_to are its spec; on
// CUDA it is one cuBLASLt GEMM whose epilogue writes the sums (CUBLASLT_EPILOGUE_BGRADB).
TR_REGISTER_OP(addmm_backward_weight_bias) {
  d.num_inputs = 2;
  d.differentiable = false;  // runs only without create_graph (addmm's backward)
  d.flops = [](const std::vector<Tensor>& in, const std::vector<Tensor>&, const Attrs&) {
    return 2.0 * double(in[0].numel()) * double(in[1].size(1));
  };
  d.infer = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<TensorSpec> {
    const Tensor &g = in[0], &a = in[1];
    TR_CHECK(g.dim() == 2 && a.dim() == 2 && g.size(0) == a.size(0) && g.dtype() == a.dtype() && is_floating(g.dtype()),
             "addmm_backward_weight_bias: expected floating grad [M, N] and mat1 [M, K] of one dtype, got ",
             dtype_name(g.dtype()), " ", g.sizes(), " and ", dtype_name(a.dtype()), " ", a.sizes());
    return {{{g.size(1), a.size(1)}, g.dtype()}, {{g.size(1)}, g.dtype()}};
  };
}

Tensor mm(const Tensor& a, const Tensor& b) { return dispatch1("mm", {a, b}); }
Tensor bmm(const Tensor& a, const Tensor& b) { return dispatch1("bmm", {a, b}); }

Tensor matmul(const Tensor& a, const Tensor& b) {
  TR_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dimension, got shapes ", a.sizes(),
           " and ", b.sizes());
  int64_t kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  TR_CHECK(a.size(-1) == kb, "matmul: shapes ", a.sizes(), " and ", b.sizes(), " cannot be multiplied (", a.size(-1),
           " != ", kb, ")");
  if (a.dim() == 1 && b.dim() == 1) {
    TR_CHECK(a.size(0) == b.size(0), "matmul: inconsistent tensor size, expected ", a.sizes(), " and ", b.sizes(),
             " to have the same number of elements");
    return mm(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
  }
  if (a.dim() == 2 && b.dim() == 2) return mm(a, b);
  if (a.dim() == 1 && b.dim() == 2) return mm(a.unsqueeze(0), b).squeeze(0);
  if (a.dim() == 2 && b.dim() == 1) return mm(a, b.unsqueeze(1)).squeeze(1);
  if (a.dim() >= 3 && b.dim() <= 2) {
    // fold the batch into rows: [..., n, k] @ [k, m]
    Tensor bb = b.dim() == 1 ? b.unsqueeze(1) : b;
    Shape out(a.sizes().begin(), a.sizes().end() - 1);
    Tensor r = mm(a.reshape({-1, a.size(-1)}), bb);
    if (b.dim() == 2) out.push_back(b.size(1));
    return r.reshape(out);
  }
  // batched, with broadcasting of the batch dims
  Tensor aa = a.dim() == 1 ? a.unsqueeze(0) : a;
  Tensor bb = b.dim() == 1 ? b.unsqueeze(1) : b;
  int64_t n = aa.size(-2), k = aa.size(-1), k2 = bb.size(-2), m = bb.size(-1);
  TR_CHECK(k == k2, "matmul: shapes ", a.sizes(), " and ", b.sizes(), " cannot be multiplied (", k, " != ", k2, ")");
  Shape ba(aa.sizes().begin(), aa.sizes().end() - 2), bb_(bb.sizes().begin(), bb.sizes().end() - 2);
  Shape batch = broadcast_shapes(ba, bb_, "matmul");
  int64_t nb = numel_of(batch);
  Shape ea = batch, eb = batch;
  ea.insert(ea.end(), {n, k});
  eb.insert(eb.end(), {k, m});
  Tensor r = bmm(aa.expand(ea).reshape({nb, n, k}), bb.expand(eb).reshape({nb, k, m}));
  Shape out = batch;
  if (a.dim() > 1) out.push_back(n);
  if (b.dim() > 1) out.push_back(m);
  return r.reshape(out);
}

namespace {

// Whether linear takes the fused addmm: fusion on, a device kernel, one dtype (the composite
// promotes mixed ones), a 1-D bias.
bool fused_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  return backends::fusion().enabled && has_kernel("addmm", x.device()) && b.dim() == 1 && x.dtype() == w.dtype() &&
         x.dtype() == b.dtype();
}

// x [..., K] folded to rows, through addmm or addmm_relu, unfolded again
Tensor linear_fused(const Tensor& x, const Tensor& w, const Tensor& b, bool relu) {
  Shape out(x.sizes().begin(), x.sizes().end() - 1);
  out.push_back(w.size(0));
  return dispatch1(relu ? "addmm_relu" : "addmm", {b, x.reshape({-1, x.size(-1)}), w.t()}).reshape(out);
}

}  // namespace

// y = x W^T + b; under autocast all three in the low precision dtype (torch's linear is on the list)
Tensor linear(const Tensor& x_arg, const Tensor& w_arg, const Tensor& b_arg) {
  const amp::CastPolicy lo = amp::CastPolicy::LowerPrecision;
  const Tensor x = amp::autocast_arg(lo, x_arg), w = amp::autocast_arg(lo, w_arg), b = amp::autocast_arg(lo, b_arg);
  TR_CHECK(w.dim() == 2, "linear: weight must be 2-D, got shape ", w.sizes());
  TR_CHECK(x.dim() >= 1 && x.size(-1) == w.size(1), "linear: input shape ", x.sizes(), " does not match weight shape ",
           w.sizes(), " (expected last input dim ", w.size(1), ")");
  if (b.defined() && x.dim() >= 2 && fused_linear(x, w, b)) return linear_fused(x, w, b, false);
  Tensor y = matmul(x, w.t());
  return b.defined() ? y + b : y;
}

Tensor linear_relu(const Tensor& x_arg, const Tensor& w_arg, const Tensor& b_arg) {
  const amp::CastPolicy lo = amp::CastPolicy::LowerPrecision;
  const Tensor x = amp::autocast_arg(lo, x_arg), w = amp::autocast_arg(lo, w_arg), b = amp::autocast_arg(lo, b_arg);
  if (b.defined() && x.dim() >= 2 && w.dim() == 2 && x.size(-1) == w.size(1) && fused_linear(x, w, b))
    return linear_fused(x, w, b, true);
  return relu(linear(x, w, b));
}

}  // namespace tr
