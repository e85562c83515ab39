// Autoregressive generation from a token model (int64 ids [B, T] -> logits [B, T, V]), nanoGPT's
// `generate` with a KV cache: each step feeds the context, cropped to its last block_size tokens
// (idx_cond = idx[:, -block_size:]), takes the last position's logits and draws the next token.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>
#include "core/rng.h"
#include "nn/kv_cache.h"
#include "nn/module.h"
#include "nn/sampling.h"

namespace tr::nn {

// The logits of the token that follows a sequence, for a sequence that grows a token at a time.
// With the cache, only the tokens not yet cached run through the model; when the sequence outgrows
// block_size the window moves and the cache is recomputed for the cropped window (its positions all
// change), so every step gives the logits an uncached forward of the same window gives. Runs under
// NoGrad on the device of the model's parameters; the model should be in eval mode.
class Decoder {
 public:
  Decoder(Module& model, int64_t block_size, bool use_cache);
  // logits [V] (as double) for the position after tokens.back(); tokens must not be empty
  std::vector<double> next_logits(const std::vector<int64_t>& tokens);

 private:
  // the last position's logits of the model's output [1, T, V], on the host
  std::vector<double> last_logits(const Tensor& out) const;
  // tokens[begin, end) as ids [1, end - begin] on the model's device
  Tensor ids_of(const std::vector<int64_t>& tokens, size_t begin, size_t end) const;

  Module& model_;
  int64_t block_size_;
  bool use_cache_;
  Device device_;
  KVCache cache_;
  std::vector<int64_t> cached_;  // the tokens the cache holds, in order
};

struct GenerateOptions {
  SamplingOptions sampling;
  int64_t max_new_tokens = 200;
  int64_t block_size = 0;            // the model's context (> 0)
  int64_t vocab_size = 0;            // > 0: only ids below it are drawn (a vocabulary padded past the tokenizer's)
  std::optional<int64_t> eos_token;  // generation stops after this token (which is returned)
  bool use_cache = true;
};

// The new tokens after `prompt` (not empty): max_new_tokens of them, or fewer when eos_token comes.
// on_token, when given, sees each as it is chosen.
std::vector<int64_t> generate(Module& model, const std::vector<int64_t>& prompt, const GenerateOptions& o,
                              Generator& gen, const std::function<void(int64_t)>& on_token = {});

}  // namespace tr::nn
