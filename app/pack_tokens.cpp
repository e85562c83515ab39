// `trainer pack --tokens`: text as token files, byte-level or GPT-2 BPE.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include "app/pack_writers.h"
#include "core/error.h"
#include "data/gpt2_tokenizer.h"
#include "data/text_dataset.h"
#include "data/token_file.h"

namespace tr::app {

namespace {

// One token file: `n` tokens in `format`, or in llm.c's version 2 (uint32) when `wide`.
void write_token_bin(const std::string& path, const uint32_t* tokens, size_t n, const std::string& format, bool wide,
                     const char* kind) {
  const std::vector<uint8_t> bytes =
      data::write_token_file(std::vector<uint32_t>(tokens, tokens + n), wide ? "llmc" : format, wide ? 2 : 1);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  TR_CHECK(f, "trainer pack: cannot write ", path);
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  TR_CHECK(std::fclose(f) == 0 && ok, "trainer pack: cannot write ", path);
  std::printf("wrote %s: %lld %s tokens (%s)\n", path.c_str(), (long long)n, kind, wide ? "llmc v2" : format.c_str());
}

// The token stream's first n_train tokens as the train split, the rest as val: out/train.bin and
// out/val.bin, or with shard_tokens > 0 llm.c's names, out/train_000000.bin, train_000001.bin, ...
// of at most shard_tokens each and out/val_000000.bin (one file), which [data] train =
// "out/train_*.bin" and eval = "out/val_*.bin" read.
void write_token_splits(const std::string& out, const std::vector<uint32_t>& stream, size_t n_train,
                        const std::string& format, bool wide, int64_t shard_tokens, const char* kind) {
  std::filesystem::create_directories(out);
  if (shard_tokens <= 0) {
    write_token_bin(out + "/train.bin", stream.data(), n_train, format, wide, kind);
    write_token_bin(out + "/val.bin", stream.data() + n_train, stream.size() - n_train, format, wide, kind);
    return;
  }
  const auto shard_path = [&](const char* split, size_t k) {
    char name[32];
    std::snprintf(name, sizeof name, "/%s_%06zu.bin", split, k);
    return out + name;
  };
  for (size_t at = 0, k = 0; at < n_train; at += size_t(shard_tokens), ++k)
    write_token_bin(shard_path("train", k), stream.data() + at, std::min(size_t(shard_tokens), n_train - at), format,
                    wide, kind);
  write_token_bin(shard_path("val", 0), stream.data() + n_train, stream.size() - n_train, format, wide, kind);
}

}  // namespace

void pack_tokens(const std::string& out, const std::vector<std::string>& inputs, const std::string& format,
                 double eval_fraction, int64_t shard_tokens) {
  data::TextDataset::Options o;
  o.paths = inputs;
  o.block_size = 1;
  o.eval_fraction = eval_fraction;
  data::TextDataset train(o);
  o.train = false;
  [[maybe_unused]] const data::TextDataset eval(train.corpus(),
                                                o);  // refuses a val split too short, as the text reader does
  const std::vector<uint32_t> stream(train.corpus()->begin(), train.corpus()->end());
  write_token_splits(out, stream, size_t(train.num_tokens()), format, false, shard_tokens, "byte");
}

void pack_bpe_tokens(const std::string& out, const std::vector<std::string>& inputs, const std::string& tokenizer_dir,
                     const std::string& format, double eval_fraction, int64_t shard_tokens) {
  data::GPT2Tokenizer tok(tokenizer_dir);
  const std::vector<std::string> files = data::expand_text_paths(inputs, data::TextDataset::kFortunesGlob);
  std::vector<uint32_t> stream;
  size_t text_bytes = 0;
  double encode_s = 0;
  for (const std::string& file : files) {
    const std::vector<uint8_t> doc = data::TextDataset::read_files({file});
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<uint32_t> ids =
        tok.encode(std::string_view(reinterpret_cast<const char*>(doc.data()), doc.size()));
    encode_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    text_bytes += doc.size();
    stream.push_back(tok.eot_token());
    stream.insert(stream.end(), ids.begin(), ids.end());
  }
  // MB = 10^6 bytes of text, the encoding alone (not reading or writing files)
  std::printf(
      "encoded %zu files, %.2f MB, into %zu tokens (vocab %u, <|endoftext|> = %u before each file) in "
      "%.3f s (one thread, PCRE2 %s): %.2f MB/s\n",
      files.size(), double(text_bytes) / 1e6, stream.size(), tok.vocab_size(), tok.eot_token(), encode_s,
      tok.pre_tokenizer().jit() ? "JIT" : "interpreter", double(text_bytes) / 1e6 / std::max(encode_s, 1e-9));
  const size_t n_train = stream.size() - size_t(double(stream.size()) * eval_fraction);
  TR_CHECK(n_train > 0 && n_train < stream.size(), "trainer pack: ", stream.size(), " tokens with eval_fraction ",
           eval_fraction, " leave the train or the val split empty");
  write_token_splits(out, stream, n_train, format, tok.vocab_size() > 65536, shard_tokens, "BPE");
}

}  // namespace tr::app
