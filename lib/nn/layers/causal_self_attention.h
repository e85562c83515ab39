// CausalSelfAttention: nanoGPT's multi-head masked self-attention over [B, T, C] (or [T, C]).
#pragma once
#include <memory>
#include "nn/layers/linear.h"
#include "nn/layer_registry.h"
#include "nn/module.h"

namespace tr::nn {

// y = c_proj(merge_heads(dropout(softmax(q k^T / sqrt(hs) + mask)) v)), then residual dropout, with
// q, k, v = split(c_attn(x)) into n_head heads of size hs = n_embd / n_head and mask = -inf above the
// diagonal (token t attends to tokens <= t). Dropout is active in train mode only.
class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(int64_t n_embd, int64_t n_head, double dropout = 0.0, bool bias = true);
  Tensor forward(const Tensor& x) override;  // [B, T, C] or [T, C] -> same shape
  std::string extra_repr() const override;

  int64_t n_embd, n_head;
  double dropout;
  std::shared_ptr<Linear> c_attn;  // C -> 3C: q, k, v side by side
  std::shared_ptr<Linear> c_proj;  // C -> C

 private:
  // The additive causal mask [T, T] (0 on and below the diagonal, -inf above), built once per T,
  // dtype and device; a member, not a buffer, so that it stays out of the state_dict (as torch's
  // non-persistent buffer).
  const Tensor& causal_mask(int64_t T, const Tensor& like);
  Tensor mask_;
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
