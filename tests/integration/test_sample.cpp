// `trainer sample` through the real binary: gpt_char trained for a few steps, then sampled: the
// prompt and exactly --max-new-tokens bytes on stdout, tokens/s on stderr, the same text for the
// same seed (with or without the KV cache), other text for another seed; bad input is one error
// and a non-zero exit. [cuda]: the same greedy text on a CUDA device.
#include <algorithm>
#include "integration/cli_harness.h"

namespace test_sample {

using namespace it;

namespace {

const std::string kGptChar = "'" + kRepo + "/configs/gpt_char.toml'";

// A gpt_char run of 3 steps in `d`; its final checkpoint directory.
std::string trained_gpt_char(const fs::path& d) {
  Result r = trainer(d, "run " + kGptChar +
                            " --set train.steps=3 --set data.batch_size=2 --set train.eval_batches=1 "
                            "--set log.progress=none");
  INFO(r.out);
  REQUIRE(r.code == 0);
  return "runs/gpt_char/checkpoints/final";
}

struct Sampled {
  int code;
  std::string out, err;
};

Sampled sample(const fs::path& d, const std::string& args) {
  fs::remove(d / "out.txt");
  fs::remove(d / "err.txt");
  Result r = trainer(d, "sample " + args + " > out.txt 2> err.txt");
  return {r.code, read(d / "out.txt"), read(d / "err.txt")};
}

}  // namespace

TEST_CASE("sample: gpt_char prints the prompt and max-new-tokens bytes, reproducible by seed",
          "[integration][sample]") {
  const fs::path d = fresh_dir("sample");
  const std::string ckpt = trained_gpt_char(d);
  // one thread: a one-token forward is too small to share, and a busy machine makes a second thread wait
  const std::string cfg = kGptChar + " --set run.threads=1 --prompt 'Hello, world' --max-new-tokens 40";
  const std::string base = cfg + " --checkpoint " + ckpt;
  Sampled a = sample(d, base + " --seed 3");
  INFO(a.err);
  REQUIRE(a.code == 0);
  CHECK(a.out.rfind("Hello, world", 0) == 0);
  CHECK(a.out.size() == 12 + 40 + 1);  // byte-level: one byte a token, then a newline
  CHECK(a.out.back() == '\n');
  CHECK_THAT(a.err, Contains("sampled 40 tokens in") && Contains("tokens/s") && Contains("kv cache, cpu"));

  CHECK(sample(d, base + " --seed 3").out == a.out);
  CHECK(sample(d, base + " --seed 3 --no-cache").out == a.out);
  CHECK(sample(d, base + " --seed 4").out != a.out);
  // the checkpoint's model.safetensors itself
  CHECK(sample(d, cfg + " --seed 3 --checkpoint " + ckpt + "/model.safetensors").out == a.out);

  // greedy: the same with and without the cache, past the 128-token context (the window is cropped);
  // in float64, where the cache's rounding cannot flip a near-tie of an undertrained model
  const std::string f64 =
      kGptChar + " --checkpoint " + ckpt + " --set run.threads=1 --set run.dtype=float64 --max-new-tokens 150";
  Sampled g = sample(d, f64 + " --temperature 0");
  REQUIRE(g.code == 0);
  CHECK(g.out.size() == 1 + 150 + 1);  // the default prompt "\n"
  CHECK(sample(d, f64 + " --top-k 1 --no-cache").out == g.out);
  Sampled none = sample(d, kGptChar + " --checkpoint " + ckpt + " --max-new-tokens 0 --prompt abc");
  CHECK(none.out == "abc\n");
  Sampled filtered = sample(d, base + " --top-k 5 --top-p 0.9 --temperature 0.7");
  CHECK(filtered.code == 0);
  CHECK(filtered.out.size() == 12 + 40 + 1);
  fs::remove_all(d);
}

namespace {

// A GPT-2 format BPE in `dir` (vocab.json, merges.txt): the 256 bytes as ids 0..255, written as
// GPT-2's bytes_to_unicode writes them, the merges "Ġ t" (256) and "h e" (257), <|endoftext|> 258.
void write_tiny_bpe(const fs::path& dir) {
  fs::create_directories(dir);
  std::vector<int> printable;
  for (int b = 0; b < 256; ++b)
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) printable.push_back(b);
  std::string vocab = "{";
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool self = std::find(printable.begin(), printable.end(), b) != printable.end();
    const int cp = self ? b : 256 + extra++;
    std::string utf8;
    if (cp < 0x80)
      utf8 = std::string(1, char(cp));
    else
      utf8 = {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
    if (utf8 == "\"" || utf8 == "\\") utf8 = "\\" + utf8;
    vocab += "\"" + utf8 + "\": " + std::to_string(b) + ", ";
  }
  vocab += "\"\u0120t\": 256, \"he\": 257, \"<|endoftext|>\": 258}";
  write(dir / "vocab.json", vocab);
  write(dir / "merges.txt", "#version: 0.2\n\u0120 t\nh e\n");
}

// A run config of a one-block GPT over `vocab` ids, trained on the text reader's bytes (ids < 256).
std::string small_gpt_config(int vocab, int n_embd) {
  const std::string v = std::to_string(vocab), c = std::to_string(n_embd);
  return R"([model]
input = [32]
input_dtype = "int64"
[[model.layers]]
type = "token_position_embedding"
vocab_size = )" +
         v + R"(
n_embd = )" +
         c + R"(
block_size = 32
[[model.layers]]
type = "repeat"
times = 1
layers = [{ type = "transformer_block", n_head = 2 }]
[[model.layers]]
type = "layer_norm"
[[model.layers]]
type = "linear"
out_features = )" +
         v + R"(
[data]
dataset = "text"
block_size = 32
batch_size = 2
[train]
steps = 2
eval_batches = 1
[run]
threads = 1
)";
}

}  // namespace

TEST_CASE("sample: a BPE model decodes with [data] tokenizer or --tokenizer", "[integration][sample]") {
  const fs::path d = fresh_dir("sample_bpe");
  write_tiny_bpe(d / "bpe");
  // a GPT over the 259 ids, trained on the text reader's bytes (ids < 256) for two steps
  const std::string model = small_gpt_config(259, 32);
  write(d / "plain.toml", model);
  std::string with_tok = model;
  with_tok.replace(with_tok.find("batch_size = 2\n"), 15, "batch_size = 2\ntokenizer = \"bpe\"\n");
  write(d / "bpe.toml", with_tok);
  Result r = trainer(d, "run bpe.toml --set log.progress=none");  // the dataset leaves the key alone
  INFO(r.out);
  REQUIRE(r.code == 0);
  const std::string ckpt = " --checkpoint runs/bpe/checkpoints/final --max-new-tokens 30";
  Sampled a = sample(d, "bpe.toml" + ckpt + " --prompt 'the tent' --seed 2");
  INFO(a.err);
  REQUIRE(a.code == 0);
  CHECK(a.out.rfind("the tent", 0) == 0);
  CHECK_THAT(a.err, Contains("tokens/s (prompt 6 tokens"));  // t he Ġt e n t: BPE's, not 8 bytes
  CHECK(sample(d, "plain.toml" + ckpt + " --prompt 'the tent' --seed 2 --tokenizer bpe").out == a.out);
  CHECK(sample(d, "bpe.toml" + ckpt + " --prompt 'the tent' --seed 2").out == a.out);
  Sampled empty = sample(d, "bpe.toml" + ckpt + " --seed 2");  // from <|endoftext|>
  CHECK(empty.code == 0);
  CHECK_THAT(empty.err, Contains("(prompt 1 tokens"));
  Sampled bytes = sample(d, "plain.toml" + ckpt);
  CHECK(bytes.code != 0);
  CHECK_THAT(bytes.err, Contains("the model has 259 logits, more than bytes: give its GPT-2 tokenizer"));
  fs::remove_all(d);
}

TEST_CASE("sample: bad input is one clear error and a non-zero exit", "[integration][sample]") {
  const fs::path d = fresh_dir("sample_errors");
  const std::string ckpt = trained_gpt_char(d);
  auto fails = [&](const std::string& args, const std::string& message) {
    Sampled s = sample(d, args);
    INFO("trainer sample " << args << "\nstdout: " << s.out << "\nstderr: " << s.err);
    CHECK(s.code != 0);
    CHECK_THAT(s.err, Contains(message));
    CHECK(s.out.empty());
  };
  fails(kGptChar + " --checkpoint runs/nope", "--checkpoint runs/nope: no such file or directory");
  fails(kGptChar + " --checkpoint runs/gpt_char", "holds no model.safetensors");
  fails(kGptChar, "--checkpoint is required");
  fails("'" + kRepo + "/configs/synthetic.toml' --checkpoint " + ckpt, "is not a token model");
  write(d / "other_gpt.toml", small_gpt_config(256, 16));
  fails("other_gpt.toml --checkpoint " + ckpt, "does not fit the model of other_gpt.toml");
  fails(kGptChar + " --checkpoint " + ckpt + " --top-p 0", "top_p must be in (0, 1]");
  fails(kGptChar + " --checkpoint " + ckpt + " --top-p 1.5", "top_p must be in (0, 1] (1: off), got 1.5");
  fails(kGptChar + " --checkpoint " + ckpt + " --temperature -1", "temperature must be >= 0 (0: greedy), got -1");
  fails(kGptChar + " --checkpoint " + ckpt + " --top-k -2", "top_k must be >= 0 (0: off, 1: greedy), got -2");
  fails(kGptChar + " --checkpoint " + ckpt + " --max-new-tokens -1", "--max-new-tokens must be >= 0, got -1");
  fails(kGptChar + " --checkpoint " + ckpt + " --max-new-tokens x", "--max-new-tokens");
  fails(kGptChar + " --checkpoint " + ckpt + " --tokenizer /nonexistent", "/nonexistent");
  fails(kGptChar + " --checkpoint " + ckpt + " --set run.device=cuda:7", "device");
  fs::remove_all(d);
}

TEST_CASE("sample on cuda: the CPU's greedy and seeded text", "[cuda][integration][sample]") {
  const fs::path d = fresh_dir("sample_cuda");
  Result info = trainer(d, "info");
  std::smatch m;
  if (!std::regex_search(info.out, m, std::regex("cuda devices: ([1-9][0-9]*)"))) {
    WARN("needs a CUDA device; the trainer binary sees none");
    return;
  }
  const std::string ckpt = trained_gpt_char(d);
  for (const std::string args : {" --temperature 0", " --seed 5 --top-k 20"}) {
    const std::string base = kGptChar + " --checkpoint " + ckpt +
                             " --prompt 'The ' --max-new-tokens 24 "
                             "--set run.dtype=float64" +
                             args;
    Sampled cpu = sample(d, base + " --set run.device=cpu");
    Sampled gpu = sample(d, base + " --set run.device=cuda");
    INFO(args << "\n" << gpu.err);
    REQUIRE(gpu.code == 0);
    CHECK_THAT(gpu.err, Contains("kv cache, cuda"));
    CHECK(gpu.out == cpu.out);
    CHECK(sample(d, base + " --set run.device=cuda --no-cache").out == cpu.out);
  }
  fs::remove_all(d);
}

}  // namespace test_sample
