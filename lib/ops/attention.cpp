// Scaled dot-product attention on q, k, v packed side by side in one tensor (what a Linear(C, 3C)
// gives; flash-attn's qkvpacked layout), with the heads' outputs side by side again:
//   attention_qkvpacked           (qkv [B, T, 3C]; n_head, causal, scale) -> (y [B, T, C], lse [B, H, T])
//   attention_qkvpacked_backward  (dy [B, T, C], qkv, y, lse) -> dqkv [B, T, 3C]
// y is torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal) of the heads; lse is
// each row's log-sum-exp of the scaled scores, which lets the backward recompute the probabilities
// instead of keeping the [B, H, T, T] matrix (ops/attention_math.h states the formulas). The
// composite chain (views, matmul, the causal mask, softmax, matmul) is the spec and runs where the
// fused op does not: fusion off or [run] attention choosing it (backends::fused_attention: on CUDA
// the composite chain until a GPU measures the fused kernel faster), dropout, a device without the
// kernel, a dtype or head dim the device's kernel does not take.
// dtypes: the CPU kernel takes f32 and f64 (under autocast, qkv cast to f32); CUDA's also takes f16
// and bf16, accumulating in f32, with y in qkv's dtype and lse in f32 (under autocast, qkv cast to
// the autocast dtype, as torch's scaled_dot_product_attention).
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include "core/grad_mode.h"
#include "ops/attention_math.h"
#include "ops/autocast.h"
#include "ops/backends.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr {

namespace {

// The geometry of packed qkv, checked; scale NaN: 1 / sqrt(head dim).
attn::Geometry geometry_of(const char* op, const Tensor& qkv, int64_t n_head, bool causal, double scale = NAN) {
  TR_CHECK(qkv.dim() == 3 && qkv.size(2) % 3 == 0, op, ": expected q, k, v packed as [B, T, 3C], got shape ",
           qkv.sizes());
  const int64_t C = qkv.size(2) / 3;
  TR_CHECK(n_head > 0 && C % n_head == 0, op, ": n_head = ", n_head, " must be positive and divide C = ", C);
  if (std::isnan(scale)) scale = 1.0 / std::sqrt(double(C / n_head));
  return attn::Geometry::of(qkv.size(0), qkv.size(1), qkv.size(2), n_head, scale, causal);
}
attn::Geometry geometry_of(const char* op, const Tensor& qkv, const Attrs& a) {
  return geometry_of(op, qkv, a.i("n_head"), a.b("causal"), a.f("scale"));
}

// Whether the device's attention kernel takes f16 and bf16 (accumulating in f32): CUDA's does;
// the CPU's micro-kernels are f32 / f64.
bool kernel_takes_16bit(Device d) { return d.is_cuda(); }
// lse's dtype: the kernels' accumulation type
DType lse_dtype(DType t) { return is_16bit(t) ? DType::F32 : t; }

// [T, T]: 0 where key j <= query i, -inf above the diagonal. The composite chain adds it in every
// layer of every step, and building it is T^2 host work and a copy, so each (dtype, device) keeps
// the largest mask built so far and gives its top-left [T, T] corner, which is the mask of T: no
// host work per call, and one mask's memory (kept for the process, a few MiB at GPT sizes; leaked
// so that none is released after the device's allocator at exit).
Tensor causal_mask(int64_t T, const Tensor& like) {
  using Key = std::tuple<DType, DeviceType, int>;
  static std::mutex mu;
  static auto* masks = new std::map<Key, Tensor>();
  const Key key{like.dtype(), like.device().type, like.device().index};
  std::lock_guard<std::mutex> lock(mu);
  Tensor& mask = (*masks)[key];
  if (!mask.defined() || mask.size(0) < T) {
    std::vector<double> m(size_t(T * T), 0.0);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = i + 1; j < T; ++j) m[size_t(i * T + j)] = -INFINITY;
    NoGradGuard no_grad;
    mask = from_vector(m, {T, T}, like.dtype()).to(like.device());
  }
  return mask.size(0) == T ? mask : mask.narrow(0, 0, T).narrow(1, 0, T);
}

// q, k or v (part 0, 1, 2) of packed qkv as [B, H, T, D]
Tensor part(const Tensor& qkv, const attn::Geometry& g, int64_t i) {
  return qkv.narrow(2, i * g.C(), g.C()).reshape({g.B, g.T, g.H, g.D}).transpose(1, 2);
}
// [B, H, T, D] -> [B, T, C]
Tensor merge_heads(const Tensor& x, const attn::Geometry& g) { return x.transpose(1, 2).reshape({g.B, g.T, g.C()}); }

// The probabilities softmax(scale q k^T + mask) as differentiable ops.
Tensor probabilities(const Tensor& q, const Tensor& k, bool causal, double scale) {
  Tensor att = matmul(q, k.transpose(-2, -1)) * scale;
  if (causal) att = att + causal_mask(q.size(2), att);
  return softmax(att, -1);
}

}  // namespace

TR_REGISTER_OP(attention_qkvpacked) {
  d.num_inputs = 1;
  d.save_outputs = true;
  d.unmaterialized_grads = 1u << 1;  // lse is the backward's, no gradient
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    const attn::Geometry g = geometry_of("attention_qkvpacked", in[0], a);
    const DType t = in[0].dtype();
    TR_CHECK(t == DType::F32 || t == DType::F64 || (is_16bit(t) && kernel_takes_16bit(in[0].device())),
             "attention_qkvpacked: expected float32 or float64",
             kernel_takes_16bit(in[0].device()) ? ", float16 or bfloat16" : "", " on ", in[0].device().str(), ", got ",
             dtype_name(t));
    return {{{g.B, g.T, g.C()}, t}, {{g.B, g.H, g.T}, lse_dtype(t)}};
  };
  d.flops = [](const std::vector<Tensor>& in, const std::vector<Tensor>&, const Attrs& a) -> double {
    const attn::Geometry g = geometry_of("attention_qkvpacked", in[0], a);
    // q k^T and p v: 2 products of T x T x D per head; causal rows see (T + 1) / 2 keys on average
    const double keys = g.causal ? double(g.T + 1) / 2.0 : double(g.T);
    return 2.0 * 2.0 * double(g.B * g.H * g.T) * keys * double(g.D);
  };
  // dqkv; lse gets no gradient (it is the backward's, not the model's)
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Tensor& qkv = c.inputs[0];
    const attn::Geometry g = geometry_of("attention_qkvpacked", qkv, c.attrs);
    if (!GradMode::is_enabled() && c.grads[0].defined())
      return {dispatch1("attention_qkvpacked_backward",
                        {c.grads[0].contiguous(), qkv, c.outputs[0].detach(), c.outputs[1].detach()}, c.attrs)};
    // create_graph: the composite backward, differentiable in qkv and dy again
    const Tensor q = part(qkv, g, 0), k = part(qkv, g, 1), v = part(qkv, g, 2);
    const Tensor p = probabilities(q, k, g.causal, g.scale);
    const Tensor gy = c.grads[0].reshape({g.B, g.T, g.H, g.D}).transpose(1, 2);
    const Tensor ds = softmax_backward(matmul(gy, v.transpose(-2, -1)), p, 3, false);
    const Tensor dq = matmul(ds, k) * g.scale, dk = matmul(ds.transpose(-2, -1), q) * g.scale,
                 dv = matmul(p.transpose(-2, -1), gy);
    return {cat({merge_heads(dq, g), merge_heads(dk, g), merge_heads(dv, g)}, 2)};
  };
}

TR_REGISTER_OP(attention_qkvpacked_backward) {
  d.num_inputs = 4;
  d.differentiable = false;  // runs only without create_graph (attention_qkvpacked's backward)
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    const char* op = "attention_qkvpacked_backward";
    const attn::Geometry g = geometry_of(op, in[1], a);
    const Shape y{g.B, g.T, g.C()}, lse{g.B, g.H, g.T};
    const DType t = in[1].dtype();
    TR_CHECK(in[0].sizes() == y && in[2].sizes() == y && in[3].sizes() == lse && in[0].dtype() == t &&
                 in[2].dtype() == t && in[3].dtype() == lse_dtype(t),
             op, ": expected dy and y ", y, " of ", dtype_name(t), " and lse ", lse, " of ", dtype_name(lse_dtype(t)),
             ", got ", in[0].sizes(), ", ", in[2].sizes(), ", ", in[3].sizes());
    return {{in[1].sizes(), t}};
  };
}

Tensor attention_qkvpacked(const Tensor& qkv, int64_t n_head, bool is_causal, double dropout_p, bool training) {
  const attn::Geometry g = geometry_of("attention_qkvpacked", qkv, n_head, is_causal);
  const Device dev = qkv.device();
  if (backends::fused_attention(dev.type) && (dropout_p == 0.0 || !training) &&
      has_kernel("attention_qkvpacked", dev) && (!dev.is_cuda() || g.D <= attn::kMaxFlashHeadDim)) {
    // Under autocast: on CUDA the kernel runs on the autocast dtype (f32 accumulation inside, as
    // flash attention in torch); on the CPU in f32 (as softmax does), the dtype of its kernel.
    const Tensor x =
        amp::autocast_arg(kernel_takes_16bit(dev) ? amp::CastPolicy::LowerPrecision : amp::CastPolicy::Fp32, qkv);
    const DType t = x.dtype();
    if (t == DType::F32 || t == DType::F64 || (is_16bit(t) && kernel_takes_16bit(dev)))
      return dispatch("attention_qkvpacked", {x.contiguous()},
                      {{"n_head", n_head}, {"causal", is_causal}, {"scale", g.scale}})[0];
  }
  Tensor p = probabilities(part(qkv, g, 0), part(qkv, g, 1), is_causal, g.scale);
  p = dropout(p, dropout_p, training);
  return merge_heads(matmul(p, part(qkv, g, 2)), g);
}

}  // namespace tr
