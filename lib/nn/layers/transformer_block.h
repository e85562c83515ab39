// TransformerBlock: nanoGPT's pre-LayerNorm Block, x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)).
#pragma once
#include <memory>
#include <string>
#include "nn/layers/causal_self_attention.h"
#include "nn/layers/linear.h"
#include "nn/module.h"

namespace tr::nn {

// nanoGPT's MLP: dropout(c_proj(gelu(c_fc(x)))), C -> 4C -> C. gelu: "none" (erf) or "tanh".
class TransformerMLP : public Module {
 public:
  TransformerMLP(int64_t n_embd, double dropout = 0.0, bool bias = true, std::string gelu = "none");
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  double dropout;
  std::string gelu;
  std::shared_ptr<Linear> c_fc, c_proj;
};

// state_dict keys as nanoGPT's Block: ln_1.{weight,bias}, attn.c_attn.*, attn.c_proj.*, ln_2.*,
// mlp.c_fc.*, mlp.c_proj.*. With bias = false the LayerNorms and Linears have no bias (nanoGPT's
// config.bias). Input [B, T, C] or [T, C].
class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t n_embd, int64_t n_head, double dropout = 0.0, bool bias = true, std::string gelu = "none");
  Tensor forward(const Tensor& x) override;

  ModulePtr ln_1, ln_2;  // LayerNorm(n_embd, eps 1e-5): weight (ones), bias (zeros, absent without bias)
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<TransformerMLP> mlp;
};

}  // namespace tr::nn
