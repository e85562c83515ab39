#include "nn/sampling.h"
#include <algorithm>
#include <cmath>
#include <numeric>
#include "core/error.h"
#include "ops/ops.h"

namespace tr::nn {

void SamplingOptions::check() const {
  TR_CHECK(std::isfinite(temperature) && temperature >= 0.0, "temperature must be >= 0 (0: greedy), got ", temperature);
  TR_CHECK(top_k >= 0, "top_k must be >= 0 (0: off, 1: greedy), got ", top_k);
  TR_CHECK(top_p > 0.0 && top_p <= 1.0, "top_p must be in (0, 1] (1: off), got ", top_p);
}

namespace {

// softmax over the entries that are not -inf (removed tokens), in double
std::vector<double> softmax_of(const std::vector<double>& l) {
  const double m = *std::max_element(l.begin(), l.end());
  std::vector<double> p(l.size());
  double z = 0;
  for (size_t i = 0; i < l.size(); ++i) z += p[i] = std::exp(l[i] - m);
  for (double& x : p) x /= z;
  return p;
}

}  // namespace

std::vector<double> next_token_probs(const std::vector<double>& logits, const SamplingOptions& o) {
  o.check();
  TR_CHECK(!logits.empty(), "sampling: no logits");
  for (size_t i = 0; i < logits.size(); ++i)
    TR_CHECK(std::isfinite(logits[i]), "sampling: the logit of token ", i, " is ", logits[i],
             " (the model's output is not finite)");
  const int64_t V = int64_t(logits.size());
  if (o.greedy()) {
    std::vector<double> p(logits.size(), 0.0);
    p[size_t(std::max_element(logits.begin(), logits.end()) - logits.begin())] = 1.0;  // the first maximum
    return p;
  }
  std::vector<double> l(logits.size());
  for (size_t i = 0; i < l.size(); ++i) l[i] = logits[i] / o.temperature;
  if (o.top_k > 0 && o.top_k < V) {
    // TopKLogitsWarper: remove scores < the k-th largest score (so ties with it stay)
    std::vector<double> s = l;
    std::nth_element(s.begin(), s.begin() + (o.top_k - 1), s.end(), std::greater<>());
    const double kth = s[size_t(o.top_k - 1)];
    for (double& x : l)
      if (x < kth) x = -INFINITY;
  }
  std::vector<double> p = softmax_of(l);
  if (o.top_p < 1.0) {
    // TopPLogitsWarper: sorted ascending, remove the tokens whose cumulative probability is
    // <= 1 - top_p, never the most likely one; what stays is the smallest most-likely set whose
    // probability reaches top_p
    std::vector<size_t> order(p.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return l[a] < l[b]; });
    double cum = 0;
    for (size_t r = 0; r + 1 < order.size(); ++r) {
      cum += p[order[r]];
      if (cum <= 1.0 - o.top_p) l[order[r]] = -INFINITY;
    }
    p = softmax_of(l);
  }
  return p;
}

int64_t sample_token(const std::vector<double>& logits, const SamplingOptions& o, Generator& gen) {
  const std::vector<double> p = next_token_probs(logits, o);
  if (o.greedy()) return int64_t(std::max_element(p.begin(), p.end()) - p.begin());
  // inverse CDF of one uniform in [0, 1); the last token of non-zero probability if rounding leaves
  // the sum below u
  const double u = rand({1}, TensorOptions(DType::F64), &gen).item();
  double cum = 0;
  int64_t last = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0.0) continue;
    last = int64_t(i);
    cum += p[i];
    if (u < cum) return last;
  }
  return last;
}

}  // namespace tr::nn
