#include "nn/layers/causal_self_attention.h"
#include <cmath>
#include "nn/layer_registry.h"
#include "ops/ops.h"

namespace tr::nn {

CausalSelfAttention::CausalSelfAttention(int64_t n_embd_, int64_t n_head_, double dropout_, bool bias)
    : Module("CausalSelfAttention"), n_embd(n_embd_), n_head(n_head_), dropout(dropout_) {
  TR_CHECK(n_embd > 0 && n_head > 0, "CausalSelfAttention: n_embd and n_head must be positive, got ", n_embd, " and ",
           n_head);
  TR_CHECK(n_embd % n_head == 0, "CausalSelfAttention: n_embd = ", n_embd, " is not divisible by n_head = ", n_head);
  TR_CHECK(dropout >= 0.0 && dropout < 1.0, "CausalSelfAttention: dropout must be in [0, 1), got ", dropout);
  c_attn = register_module("c_attn", std::make_shared<Linear>(n_embd, 3 * n_embd, bias));
  c_proj = register_module("c_proj", std::make_shared<Linear>(n_embd, n_embd, bias));
}

const Tensor& CausalSelfAttention::causal_mask(int64_t T, const Tensor& like) {
  if (mask_.defined() && mask_.size(0) == T && mask_.dtype() == like.dtype() && mask_.device() == like.device())
    return mask_;
  std::vector<double> m(size_t(T * T), 0.0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = i + 1; j < T; ++j) m[size_t(i * T + j)] = -INFINITY;
  mask_ = from_vector(m, {T, T}, like.dtype()).to(like.device());
  return mask_;
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  TR_CHECK((x.dim() == 3 || x.dim() == 2) && x.size(-1) == n_embd, "CausalSelfAttention(n_embd=", n_embd,
           "): expected an input of shape [B, T, ", n_embd, "] or [T, ", n_embd, "], got ", x.sizes());
  const bool unbatched = x.dim() == 2;
  Tensor h = unbatched ? x.unsqueeze(0) : x;
  const int64_t B = h.size(0), T = h.size(1), C = n_embd, hs = C / n_head;
  Tensor qkv = (*c_attn)(h);  // [B, T, 3C]
  // [B, T, C] slice i of qkv -> [B, nh, T, hs]
  auto heads = [&](int64_t i) { return qkv.narrow(2, i * C, C).reshape({B, T, n_head, hs}).transpose(1, 2); };
  Tensor q = heads(0), k = heads(1), v = heads(2);
  Tensor att = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(hs)));  // [B, nh, T, T]
  att = softmax(att + causal_mask(T, att), -1);
  att = tr::dropout(att, dropout, is_training());
  Tensor y = matmul(att, v);                       // [B, nh, T, hs]
  y = y.transpose(1, 2).reshape({B, T, C});        // heads side by side again
  y = tr::dropout((*c_proj)(y), dropout, is_training());
  return unbatched ? y.squeeze(0) : y;
}

std::string CausalSelfAttention::extra_repr() const {
  return str("n_embd=", n_embd, ", n_head=", n_head, ", dropout=", dropout);
}

AttentionArgs read_attention_args(const TomlTable& t, const ShapeInfo& io) {
  expect_rank(t, io, 2, "[T, C]");
  int64_t C = io.shape[1];
  if (t.has("n_embd") && t.get_int("n_embd") != C)
    layer_error(t, str("n_embd = ", t.get_int("n_embd"), " does not match the input shape ", io.str(),
                       " coming from the previous layer"));
  int64_t nh = t.get_int("n_head");
  if (nh <= 0 || C % nh != 0)
    t.fail("n_head", str("= ", nh, " must be positive and divide n_embd = ", C, " (the last dim of the input ", io.str(), ")"));
  double p = t.get_float("dropout", 0.0);
  if (p < 0.0 || p >= 1.0) t.fail("dropout", str("must be in [0, 1), got ", p));
  return {C, nh, p};
}

namespace {

ModulePtr build_causal_self_attention(const TomlTable& t, ShapeInfo& io) {
  AttentionArgs a = read_attention_args(t, io);
  return std::make_shared<CausalSelfAttention>(a.n_embd, a.n_head, a.dropout, t.get_bool("bias", true));
}

}  // namespace

TR_REGISTER_LAYER("causal_self_attention", "n_head, dropout = 0, bias = true, n_embd (optional check); input [T, C]",
                  build_causal_self_attention);

}  // namespace tr::nn
