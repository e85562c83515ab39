// PositionEmbedding: learned absolute positions added to a sequence, x + weight[start : start+T]
// (GPT-2's wpe: nanoGPT's `tok_emb + self.transformer.wpe(pos)` with the add in the layer, so that
// a model file can place it after a token embedding and keep nanoGPT's state_dict names).
#pragma once
#include "nn/module.h"

namespace tr::nn {

class PositionEmbedding : public Module {
 public:
  // weight [block_size, n_embd] ~ N(0, 1), nn.Embedding's default.
  PositionEmbedding(int64_t block_size, int64_t n_embd);
  // x [..., T, n_embd] -> x + weight[start : start + T], start + T <= block_size. start is the
  // position of x's first element: 0, or the length of the active KVCache (nn/kv_cache.h) when a
  // decoder feeds new tokens after a cached prefix.
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t block_size, n_embd;
  Tensor weight;
};

}  // namespace tr::nn
