#include "nn/layers/causal_self_attention.h"
#include <cmath>
#include "nn/kv_cache.h"
#include "nn/layer_registry.h"
#include "ops/ops.h"

namespace tr::nn {

namespace {

// q, k or v (part 0, 1, 2) of packed qkv [B, T, 3C] as [B, n_head, T, C / n_head]
Tensor head_part(const Tensor& qkv, int64_t part, int64_t n_head) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
  return qkv.narrow(2, part * C, C).reshape({B, T, n_head, C / n_head}).transpose(1, 2);
}

// T new queries q [B, H, T, D] at positions past .. past + T - 1 over all S = past + T keys and
// values [B, H, S, D]: softmax(q k^T / sqrt(D) + mask) v with the heads merged, [B, T, H D]. Query i
// sees keys j <= past + i; a single query (a decoding step) sees every key and needs no mask.
Tensor attend_cached(const Tensor& q, const Tensor& k, const Tensor& v, int64_t past) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3), S = k.size(2);
  Tensor att = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(D)));  // [B, H, T, S]
  if (T > 1) {
    std::vector<double> mask(size_t(T * S), 0.0);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = past + i + 1; j < S; ++j) mask[size_t(i * S + j)] = -INFINITY;
    att = att + from_vector(mask, {T, S}, TensorOptions(att.dtype())).to(att.device());
  }
  return matmul(softmax(att, -1), v).transpose(1, 2).reshape({B, T, H * D});
}

}  // namespace

CausalSelfAttention::CausalSelfAttention(int64_t n_embd_, int64_t n_head_, double dropout_, bool bias)
    : Module("CausalSelfAttention"), n_embd(n_embd_), n_head(n_head_), dropout(dropout_) {
  TR_CHECK(n_embd > 0 && n_head > 0, "CausalSelfAttention: n_embd and n_head must be positive, got ", n_embd, " and ",
           n_head);
  TR_CHECK(n_embd % n_head == 0, "CausalSelfAttention: n_embd = ", n_embd, " is not divisible by n_head = ", n_head);
  TR_CHECK(dropout >= 0.0 && dropout < 1.0, "CausalSelfAttention: dropout must be in [0, 1), got ", dropout);
  c_attn = register_module("c_attn", std::make_shared<Linear>(n_embd, 3 * n_embd, bias));
  c_proj = register_module("c_proj", std::make_shared<Linear>(n_embd, n_embd, bias));
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  TR_CHECK((x.dim() == 3 || x.dim() == 2) && x.size(-1) == n_embd, "CausalSelfAttention(n_embd=", n_embd,
           "): expected an input of shape [B, T, ", n_embd, "] or [T, ", n_embd, "], got ", x.sizes());
  const bool unbatched = x.dim() == 2;
  Tensor h = unbatched ? x.unsqueeze(0) : x;
  const Tensor qkv = (*c_attn)(h);           // [B, T, 3C]
  Tensor y;                                  // [B, T, C]
  if (KVCache* cache = KVCache::active()) {  // decoding (nn/kv_cache.h): attend to the cached positions too
    const int64_t past = cache->length();
    auto [k, v] = cache->append(*this, head_part(qkv, 1, n_head), head_part(qkv, 2, n_head));
    // a context's first forward is plain causal attention, the fused op as in training
    y = past == 0 ? attention_qkvpacked(qkv, n_head, true) : attend_cached(head_part(qkv, 0, n_head), k, v, past);
  } else {
    y = attention_qkvpacked(qkv, n_head, true, dropout, is_training());
  }
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
    t.fail("n_head",
           str("= ", nh, " must be positive and divide n_embd = ", C, " (the last dim of the input ", io.str(), ")"));
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
