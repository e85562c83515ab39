// `trainer sample CONFIG --checkpoint DIR`: the run's model with the checkpoint's weights continues a
// prompt (nanoGPT's sample.py), with a KV cache (nn/kv_cache.h) unless --no-cache. The text, prompt
// and generation, goes to stdout as it is made; the speed to stderr.
#include "app/commands.h"
#include <omp.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include "config/run_config.h"
#include "core/cuda_hooks.h"
#include "data/gpt2_tokenizer.h"
#include "nn/generate.h"
#include "nn/model_file.h"
#include "ops/backends.h"
#include "train/run_setup.h"

namespace tr::app {

namespace {

namespace fs = std::filesystem;

// Text <-> token ids: GPT-2's BPE (with its end-of-text token) or bytes (no end-of-text).
class TextCodec {
 public:
  explicit TextCodec(const std::string& bpe_dir) {
    if (!bpe_dir.empty()) bpe_ = std::make_unique<data::GPT2Tokenizer>(bpe_dir);
  }
  bool is_bpe() const { return bpe_ != nullptr; }
  int64_t vocab_size() const { return bpe_ ? int64_t(bpe_->vocab_size()) : 256; }
  std::optional<int64_t> eot() const { return bpe_ ? std::optional<int64_t>(bpe_->eot_token()) : std::nullopt; }
  std::vector<int64_t> encode(const std::string& text) {  // the BPE's encode fills its cache
    if (!bpe_)
      return std::vector<int64_t>(reinterpret_cast<const uint8_t*>(text.data()),
                                  reinterpret_cast<const uint8_t*>(text.data()) + text.size());
    const std::vector<uint32_t> ids = bpe_->encode(text);
    return std::vector<int64_t>(ids.begin(), ids.end());
  }
  std::string bytes_of(int64_t id) const { return bpe_ ? bpe_->token_bytes(uint32_t(id)) : std::string(1, char(id)); }

 private:
  std::unique_ptr<data::GPT2Tokenizer> bpe_;
};

// The run's model with the checkpoint's weights, in eval mode on the run's device and dtype.
nn::Model load_model(const config::RunConfig& cfg, const std::string& checkpoint) {
  nn::Model m = train::build_model(cfg);
  TR_CHECK(m.input.dtype == DType::I64 && m.input.shape.size() == 1 && m.output.shape.size() == 2 &&
               m.output.shape[0] == m.input.shape[0] && is_floating(m.output.dtype),
           "trainer sample: ", cfg.path, ": the model is not a token model: it maps ", m.input.str(), " to ",
           m.output.str(), "; sampling needs token ids int64 [T] in and logits [T, vocab] out (a GPT)");
  TR_CHECK(fs::exists(checkpoint), "trainer sample: --checkpoint ", checkpoint, ": no such file or directory");
  try {
    train::load_weights(*m.net, train::weights_file(checkpoint), cfg.path);
  } catch (const Error& e) { throw Error(str("trainer sample: ", e.what())); }
  if (cfg.run.dtype == "float64") m.net->to(DType::F64);
  const Device device = train::pick_device(cfg.run.device, distributed::DistEnv{}, cfg.path);
  if (device.is_cuda()) {
    cuda::set_device(device.index);
    m.net->to(device);
  }
  m.net->eval();
  return m;
}

void sample(const SampleCommand& a) {
  nn::GenerateOptions o;
  o.sampling = {a.temperature, a.top_k, a.top_p};
  try {
    o.sampling.check();
  } catch (const Error& e) { throw Error(str("trainer sample: ", e.what())); }
  TR_CHECK(a.max_new_tokens >= 0, "trainer sample: --max-new-tokens must be >= 0, got ", a.max_new_tokens);
  config::RunConfig cfg = a.config.load();
  if (cfg.run.threads > 0) omp_set_num_threads(int(cfg.run.threads));
  backends::fusion().enabled = cfg.run.fused_ops;
  backends::fusion().attention = backends::attention_path(cfg.run.attention);
  backends::matmul().allow_tf32 = cfg.run.allow_tf32.value_or(false);
  const nn::Model m = load_model(cfg, a.checkpoint);
  const int64_t block_size = m.input.shape[0], vocab = m.output.shape[1];

  TextCodec codec(a.tokenizer.empty() ? cfg.data.tokenizer : a.tokenizer);
  TR_CHECK(codec.is_bpe() || vocab <= 256, "trainer sample: the model has ", vocab,
           " logits, more than bytes: "
           "give its GPT-2 tokenizer (--tokenizer DIR or [data] tokenizer = \"DIR\", a directory of vocab.json and "
           "merges.txt)");
  TR_CHECK(codec.vocab_size() <= vocab || !codec.is_bpe(), "trainer sample: the tokenizer has ", codec.vocab_size(),
           " tokens, the model only ", vocab, " logits");
  // an empty prompt starts from <|endoftext|> (a document's start in GPT-2's data) or, byte-level,
  // from "\n" as nanoGPT's sample.py does
  const std::string prompt_text = a.prompt.empty() && !codec.is_bpe() ? "\n" : a.prompt;
  std::vector<int64_t> prompt = codec.encode(prompt_text);
  if (prompt.empty()) prompt = {*codec.eot()};
  for (int64_t t : prompt)
    TR_CHECK(t < vocab, "trainer sample: the prompt holds token ", t, ", beyond the model's vocabulary of ", vocab);

  o.max_new_tokens = a.max_new_tokens;
  o.block_size = block_size;
  o.vocab_size = std::min(vocab, codec.vocab_size());
  o.eos_token = codec.eot();
  o.use_cache = !a.no_cache;
  Generator gen(a.seed.value_or(uint64_t(cfg.run.seed)));

  std::fwrite(prompt_text.data(), 1, prompt_text.size(), stdout);
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int64_t> out = nn::generate(*m.net, prompt, o, gen, [&](int64_t t) {
    if (o.eos_token && t == *o.eos_token) return;  // the end, not text
    const std::string b = codec.bytes_of(t);
    std::fwrite(b.data(), 1, b.size(), stdout);
    std::fflush(stdout);
  });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\n");
  std::fflush(stdout);
  std::fprintf(stderr, "sampled %zu tokens in %.3f s: %.1f tokens/s (prompt %zu tokens, %s, %s)\n", out.size(), s,
               s > 0 ? double(out.size()) / s : 0.0, prompt.size(), o.use_cache ? "kv cache" : "no cache",
               m.net->parameters().front().device().str().c_str());
}

}  // namespace

void SampleCommand::add_to(CLI::App& app) {
  auto* c = app.add_subcommand("sample",
                               "continue a prompt with a trained token model (a GPT): text to stdout, "
                               "tokens/s to stderr");
  config.add_file(*c);
  add_checkpoint_option(*c, checkpoint);
  c->add_option("--prompt", prompt, "text to continue (default: <|endoftext|> with a GPT-2 tokenizer, else \"\\n\")");
  // the ranges are checked by sample() (SamplingOptions::check), with messages that say what the values mean
  c->add_option("--max-new-tokens", max_new_tokens, "tokens to generate at most (default 200)");
  c->add_option("--temperature", temperature, "logits / temperature before sampling; 0: greedy (default 1)");
  c->add_option("--top-k", top_k, "sample from the k most likely tokens only; 1: greedy (default 0: all)");
  c->add_option("--top-p", top_p,
                "nucleus sampling: the smallest set of most likely tokens whose probability "
                "reaches p (default 1: all)");
  c->add_option("--seed", seed, "the sampler's Philox seed (default: [run] seed)");
  c->add_option("--tokenizer", tokenizer,
                "GPT-2 BPE directory (vocab.json, merges.txt) for a token run (default: "
                "[data] tokenizer; byte-level without one)");
  c->add_flag("--no-cache", no_cache, "recompute the whole context for every token (no KV cache)");
  config.add_overrides(*c);
  c->callback([this] { execute(); });
}

void SampleCommand::execute() const { sample(*this); }

}  // namespace tr::app
