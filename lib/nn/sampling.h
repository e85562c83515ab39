// The next token from a row of logits: temperature, top-k and top-p (nucleus) as Hugging Face's
// TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper apply them, in that order, then one
// draw from the Philox generator. Greedy (temperature 0 or top_k 1) is the first most likely token,
// torch.argmax's choice, and draws nothing.
#pragma once
#include <cstdint>
#include <vector>
#include "core/rng.h"

namespace tr::nn {

struct SamplingOptions {
  double temperature = 1.0;  // logits / temperature; 0: greedy
  int64_t top_k = 0;         // > 0: only tokens whose logit is >= the k-th largest (ties kept); 1: greedy
  double top_p = 1.0;        // < 1: the smallest set of most likely tokens whose probability reaches top_p

  bool greedy() const { return temperature == 0.0 || top_k == 1; }
  // temperature >= 0, top_k >= 0, 0 < top_p <= 1; errors name the option.
  void check() const;
};

// The distribution a token is drawn from: softmax(logits / temperature) restricted to the top-k and
// then to the top-p set and renormalised (one-hot at the argmax when greedy). Logits must be finite.
std::vector<double> next_token_probs(const std::vector<double>& logits, const SamplingOptions& o);

// A token drawn from next_token_probs(logits, o) with one uniform of `gen` (none when greedy).
int64_t sample_token(const std::vector<double>& logits, const SamplingOptions& o, Generator& gen);

}  // namespace tr::nn
