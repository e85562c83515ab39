// TokenPositionEmbedding: GPT's input layer, dropout(wte[ids] + wpe[0..T-1]) for int64 ids [..., T]
// (positions from the active KVCache's length instead of 0 while decoding, nn/kv_cache.h).
#pragma once
#include "nn/module.h"

namespace tr::nn {

// Children wte (weight [vocab_size, n_embd]) and wpe (weight [block_size, n_embd]), both N(0, 0.02)
// as nanoGPT's _init_weights, so the state_dict keys are wte.weight and wpe.weight.
class TokenPositionEmbedding : public Module {
 public:
  TokenPositionEmbedding(int64_t vocab_size, int64_t n_embd, int64_t block_size, double dropout = 0.0);
  Tensor forward(const Tensor& ids) override;  // [..., T] integer ids, T <= block_size -> [..., T, n_embd]
  std::string extra_repr() const override;

  int64_t vocab_size, n_embd, block_size;
  double dropout;
  ModulePtr wte, wpe;
};

}  // namespace tr::nn
