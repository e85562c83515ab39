// CausalSelfAttention: nanoGPT's multi-head masked self-attention over [B, T, C] (or [T, C]).
#pragma once
#include <memory>
#include "nn/layers/linear.h"
#include "nn/layer_registry.h"
#include "nn/module.h"

namespace tr::nn {

// y = c_proj(merge_heads(dropout(softmax(q k^T / sqrt(hs) + mask)) v)), then residual dropout, with
// q, k, v = split(c_attn(x)) into n_head heads of size hs = n_embd / n_head and mask = -inf above the
// diagonal (token t attends to tokens <= t). Dropout is active in train mode only. The attention
// itself is attention_qkvpacked (one fused op where it can run). While a KVCache is active
// (nn/kv_cache.h) the new positions' keys and values are appended to the layer's cached ones and
// the new queries attend to all of them.
class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(int64_t n_embd, int64_t n_head, double dropout = 0.0, bool bias = true);
  Tensor forward(const Tensor& x) override;  // [B, T, C] or [T, C] -> same shape
  std::string extra_repr() const override;

  int64_t n_embd, n_head;
  double dropout;
  std::shared_ptr<Linear> c_attn;  // C -> 3C: q, k, v side by side
  std::shared_ptr<Linear> c_proj;  // C -> C
};

// n_embd (from the input [T, C], optionally checked), n_head (dividing it) and dropout, as the
// attention and transformer-block builders read them.
struct AttentionArgs {
  int64_t n_embd;
  int64_t n_head;
  double dropout;
};
AttentionArgs read_attention_args(const TomlTable& t, const ShapeInfo& io);

}  // namespace tr::nn
