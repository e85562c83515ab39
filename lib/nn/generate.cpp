#include "nn/generate.h"
#include <algorithm>
#include "core/error.h"
#include "core/grad_mode.h"
#include "ops/ops.h"

namespace tr::nn {

namespace {

Device device_of(const Module& m) {
  const std::vector<Tensor> ps = m.parameters();
  return ps.empty() ? kCPU : ps.front().device();
}

}  // namespace

Decoder::Decoder(Module& model, int64_t block_size, bool use_cache)
    : model_(model), block_size_(block_size), use_cache_(use_cache), device_(device_of(model)) {
  TR_CHECK(block_size > 0, "Decoder: block_size must be positive, got ", block_size);
}

Tensor Decoder::ids_of(const std::vector<int64_t>& tokens, size_t begin, size_t end) const {
  const std::vector<double> v(tokens.begin() + ptrdiff_t(begin), tokens.begin() + ptrdiff_t(end));
  return from_vector(v, {1, int64_t(v.size())}, TensorOptions(DType::I64)).to(device_);
}

std::vector<double> Decoder::last_logits(const Tensor& out) const {
  TR_CHECK(out.dim() == 3 && out.size(0) == 1, "Decoder: expected the model's output [1, T, V] for ids [1, T], got ",
           out.sizes());
  return out.select(1, out.size(1) - 1).reshape({out.size(2)}).to(kCPU).tolist();
}

std::vector<double> Decoder::next_logits(const std::vector<int64_t>& tokens) {
  TR_CHECK(!tokens.empty(), "Decoder: no tokens to continue");
  // nanoGPT's idx_cond = idx[:, -block_size:]
  const size_t end = tokens.size(), begin = end > size_t(block_size_) ? end - size_t(block_size_) : 0;
  NoGradGuard no_grad;
  if (!use_cache_) return last_logits(model_(ids_of(tokens, begin, end)));
  // the cache is reused when it holds a prefix of the window (a window that moved changes every
  // position, so it is recomputed)
  const bool prefix =
      cached_.size() < end - begin && std::equal(cached_.begin(), cached_.end(), tokens.begin() + ptrdiff_t(begin));
  if (!prefix) {
    cache_.clear();
    cached_.clear();
  }
  const size_t from = begin + cached_.size();
  Tensor out = cache_.forward(model_, ids_of(tokens, from, end));
  cached_.insert(cached_.end(), tokens.begin() + ptrdiff_t(from), tokens.end());
  return last_logits(out);
}

std::vector<int64_t> generate(Module& model, const std::vector<int64_t>& prompt, const GenerateOptions& o,
                              Generator& gen, const std::function<void(int64_t)>& on_token) {
  TR_CHECK(!prompt.empty(), "generate: the prompt must hold at least one token");
  TR_CHECK(o.max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got ", o.max_new_tokens);
  o.sampling.check();
  Decoder dec(model, o.block_size, o.use_cache);
  std::vector<int64_t> seq = prompt, out;
  while (int64_t(out.size()) < o.max_new_tokens) {
    std::vector<double> logits = dec.next_logits(seq);
    if (o.vocab_size > 0 && int64_t(logits.size()) > o.vocab_size) logits.resize(size_t(o.vocab_size));
    const int64_t t = sample_token(logits, o.sampling, gen);
    seq.push_back(t);
    out.push_back(t);
    if (on_token) on_token(t);
    if (o.eos_token && t == *o.eos_token) break;
  }
  return out;
}

}  // namespace tr::nn
