// KVCache: the keys and values of the positions a decoder has already run (Hugging Face's
// past_key_values), so that generating one more token runs the model on that token alone instead of
// on the whole context again.
//
// A model built from the layer zoo honours it without a change to its file: while a cache is active
// on the calling thread (inside KVCache::forward), CausalSelfAttention attends its new queries to
// every cached key and appends its new keys and values, and PositionEmbedding /
// TokenPositionEmbedding number the new positions from length(). The other layers of a GPT act
// position by position and need nothing. Outside KVCache::forward (training, eval) nothing changes.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <utility>
#include "core/tensor.h"
#include "nn/module.h"

namespace tr::nn {

class KVCache {
 public:
  KVCache() = default;
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;

  // model(ids) under NoGrad with this cache active on this thread: ids [B, T] (or [T]) are the
  // positions length() .. length() + T - 1 of each sequence. Returns the model's output for these T
  // positions only; afterwards length() has grown by T. Every layer that appended must now hold
  // length() positions (a layer that mixes positions without honouring the cache is not caught).
  Tensor forward(Module& model, const Tensor& ids);

  // Positions cached: the position of the next token fed.
  int64_t length() const { return length_; }
  // Forgets every position (a new prompt, or a context cropped to its last block_size tokens).
  void clear();

  // The cache the calling thread's forward is running under, or null (always, outside forward()).
  static KVCache* active();

  // For a layer that mixes positions, inside forward(): the layer's keys and values so far with the
  // new positions' k, v [B, H, T, D] appended, each [B, H, length() + T, D]. Called once per forward
  // per layer.
  std::pair<Tensor, Tensor> append(const Module& layer, const Tensor& k, const Tensor& v);

 private:
  struct Entry {
    Tensor k, v;  // [B, H, positions, D]
  };
  std::unordered_map<const Module*, Entry> entries_;
  int64_t length_ = 0;
};

}  // namespace tr::nn
