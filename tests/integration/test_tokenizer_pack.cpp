// `trainer pack --tokens --tokenizer` through the real binary: each input file is one document
// with <|endoftext|> before it, its ids those of tests/fixtures/gpt2_bpe_fixtures.json (tokenizers'
// ids); the tail is val; --format, --shard-tokens (llm.c's shard names), llm.c version 2 for a
// vocabulary over 65536; the byte-level pack keeps its names; bad arguments are one error.
#include <nlohmann/json.hpp>
#include "integration/cli_harness.h"

namespace test_tokenizer_pack {

using namespace it;

namespace {

const std::string kTokenizer = kRepo + "/tests/fixtures/gpt2_bpe";

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

uint32_t le(const std::string& b, size_t at, int width) {
  uint32_t v = 0;
  for (int k = 0; k < width; ++k) v |= uint32_t(uint8_t(b[at + size_t(k)])) << (8 * k);
  return v;
}

// The tokens of a file: nanoGPT's uint16 alone, or llm.c's header (checked) and its version's width.
std::vector<uint32_t> tokens_of(const fs::path& p, const std::string& layout) {
  const std::string b = read_bytes(p);
  size_t at = 0;
  int width = 2;
  if (layout != "nanogpt") {
    REQUIRE(b.size() >= 1024);
    CHECK(le(b, 0, 4) == 20240520);
    CHECK(le(b, 4, 4) == (layout == "llmc2" ? 2u : 1u));
    at = 1024;
    width = layout == "llmc2" ? 4 : 2;
    CHECK(le(b, 8, 4) == (b.size() - at) / size_t(width));
  }
  REQUIRE((b.size() - at) % size_t(width) == 0);
  std::vector<uint32_t> t;
  for (; at < b.size(); at += size_t(width)) t.push_back(le(b, at, width));
  return t;
}

struct Docs {
  std::vector<std::string> files;
  std::vector<uint32_t> stream;  // what pack must write: <|endoftext|> before each document's ids
};

// Three held-out texts of the fixture as files in `d`.
Docs write_docs(const fs::path& d) {
  std::ifstream f(kRepo + "/tests/fixtures/gpt2_bpe_fixtures.json");
  const nlohmann::json fx = nlohmann::json::parse(f);
  Docs docs;
  for (const auto& c : fx["cases"]) {
    const std::string name = c["name"].get<std::string>();
    if (name != "accents" && name != "contractions" && name != "zippy: first fortune") continue;
    const std::string file = "doc" + std::to_string(docs.files.size()) + ".txt";
    std::ofstream(d / file, std::ios::binary) << c["text"].get<std::string>();
    docs.files.push_back(file);
    docs.stream.push_back(fx["eot"].get<uint32_t>());
    for (uint32_t id : c["ids"].get<std::vector<uint32_t>>()) docs.stream.push_back(id);
  }
  REQUIRE(docs.files.size() == 3);
  return docs;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += " " + x;
  return s;
}

std::string shard_name(const char* split, size_t k) {
  char name[32];
  std::snprintf(name, sizeof name, "%s_%06zu.bin", split, k);
  return name;
}

std::vector<uint32_t> slice(const std::vector<uint32_t>& v, size_t begin, size_t end) {
  return {v.begin() + ptrdiff_t(begin), v.begin() + ptrdiff_t(end)};
}

}  // namespace

TEST_CASE("pack --tokenizer: GPT-2 BPE documents with <|endoftext|> before each, the tail as val",
          "[integration][tokens][tokenizer]") {
  fs::path d = fresh_dir("bpe_pack");
  const Docs docs = write_docs(d);
  const size_t n = docs.stream.size(), n_val = size_t(double(n) * 0.25), n_train = n - n_val;
  REQUIRE(n > 60);

  Result p = trainer(d, "pack --tokens out --tokenizer '" + kTokenizer + "' --eval-fraction 0.25" + joined(docs.files));
  INFO(p.out);
  REQUIRE(p.code == 0);
  CHECK_THAT(p.out, Contains("encoded 3 files") &&
                        Contains(" into " + std::to_string(n) +
                                 " tokens (vocab 2000, "
                                 "<|endoftext|> = 0 before each file)") &&
                        Contains("MB/s"));
  CHECK_THAT(p.out, Contains("wrote out/train.bin: " + std::to_string(n_train) + " BPE tokens (nanogpt)"));
  CHECK_THAT(p.out, Contains("wrote out/val.bin: " + std::to_string(n_val) + " BPE tokens (nanogpt)"));
  CHECK(tokens_of(d / "out/train.bin", "nanogpt") == slice(docs.stream, 0, n_train));
  CHECK(tokens_of(d / "out/val.bin", "nanogpt") == slice(docs.stream, n_train, n));

  // llm.c's header, version 1
  REQUIRE(trainer(d, "pack --tokens llmc --format llmc --tokenizer '" + kTokenizer + "'" + joined(docs.files)).code ==
          0);
  const size_t n_val10 = size_t(double(n) * 0.1);
  CHECK(tokens_of(d / "llmc/train.bin", "llmc1") == slice(docs.stream, 0, n - n_val10));
  CHECK(tokens_of(d / "llmc/val.bin", "llmc1") == slice(docs.stream, n - n_val10, n));
}

TEST_CASE("pack --shard-tokens: the train split as llm.c's shards of at most N tokens, val as one file",
          "[integration][tokens][tokenizer]") {
  fs::path d = fresh_dir("bpe_shards");
  const Docs docs = write_docs(d);
  const size_t n = docs.stream.size(), n_val = size_t(double(n) * 0.1), n_train = n - n_val;
  const size_t shard = 25, shards = (n_train + shard - 1) / shard;
  REQUIRE(shards >= 3);
  Result p = trainer(
      d, "pack --tokens out --format llmc --shard-tokens 25 --tokenizer '" + kTokenizer + "'" + joined(docs.files));
  INFO(p.out);
  REQUIRE(p.code == 0);
  std::vector<uint32_t> train;
  for (size_t k = 0; k < shards; ++k) {
    const std::string name = shard_name("train", k);
    const std::vector<uint32_t> t = tokens_of(d / "out" / name, "llmc1");
    CHECK(t.size() == std::min(shard, n_train - k * shard));
    CHECK_THAT(p.out, Contains("wrote out/" + name + ": " + std::to_string(t.size()) + " BPE tokens (llmc)"));
    train.insert(train.end(), t.begin(), t.end());
  }
  CHECK(train == slice(docs.stream, 0, n_train));
  CHECK(tokens_of(d / "out/val_000000.bin", "llmc1") == slice(docs.stream, n_train, n));
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(d / "out")) ++files;
  CHECK(files == shards + 1);  // no train.bin or val.bin beside them

  // byte-level tokens shard the same way: the file's bytes
  const std::string text = read_bytes(d / docs.files[2]);
  const size_t b_train = text.size() - text.size() / 2, b_shards = (b_train + 29) / 30;
  REQUIRE(b_shards >= 2);
  REQUIRE(trainer(d, "pack --tokens bytes --shard-tokens 30 --eval-fraction 0.5 " + docs.files[2]).code == 0);
  std::string bytes;
  for (size_t k = 0; k < b_shards; ++k)
    for (uint32_t t : tokens_of(d / "bytes" / shard_name("train", k), "nanogpt")) bytes.push_back(char(t));
  CHECK(bytes.size() == b_train);
  CHECK(!fs::exists(d / "bytes" / shard_name("train", b_shards)));
  for (uint32_t t : tokens_of(d / "bytes/val_000000.bin", "nanogpt")) bytes.push_back(char(t));
  CHECK(bytes == text);
}

TEST_CASE("pack --tokenizer: a vocabulary over 65536 is written as llm.c version 2 (uint32)",
          "[integration][tokens][tokenizer]") {
  fs::path d = fresh_dir("bpe_wide");
  const Docs docs = write_docs(d);
  // the fixture's vocabulary padded to 70000 tokens no merge reaches
  fs::create_directories(d / "wide");
  fs::copy_file(kTokenizer + "/merges.txt", d / "wide/merges.txt");
  std::string vocab = read_bytes(kTokenizer + "/vocab.json");
  while (vocab.back() != '}') vocab.pop_back();  // a trailing newline, if any
  vocab.pop_back();
  for (int id = 2000; id < 70000; ++id) vocab += ",\"\xc4\x80pad" + std::to_string(id) + "\":" + std::to_string(id);
  std::ofstream(d / "wide/vocab.json", std::ios::binary) << vocab + "}";
  Result p = trainer(d, "pack --tokens out --tokenizer wide" + joined(docs.files));
  INFO(p.out);
  REQUIRE(p.code == 0);
  CHECK_THAT(p.out, Contains("(vocab 70000, ") && Contains("BPE tokens (llmc v2)"));
  const size_t n = docs.stream.size(), n_train = n - size_t(double(n) * 0.1);
  CHECK(tokens_of(d / "out/train.bin", "llmc2") == slice(docs.stream, 0, n_train));
  CHECK(tokens_of(d / "out/val.bin", "llmc2") == slice(docs.stream, n_train, n));
}

TEST_CASE("pack --tokenizer: bad arguments are one error", "[integration][tokens][tokenizer]") {
  fs::path d = fresh_dir("bpe_errors");
  write(d / "a.txt", "some text for the tokenizer\n");
  Result r = trainer(d, "pack --tokens out --tokenizer nowhere a.txt");
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Contains("cannot open vocab.json 'nowhere/vocab.json'"));
  Result s = trainer(d, "pack --recordio out --shard-tokens 10");
  CHECK(s.code != 0);
  CHECK_THAT(s.out, Contains("--shard-tokens requires --tokens"));
  Result z = trainer(d, "pack --tokens out --shard-tokens 0 a.txt");
  CHECK(z.code != 0);
  CHECK_THAT(z.out, Contains("--shard-tokens"));
  Result e = trainer(d, "pack --tokens out --tokenizer '" + kTokenizer + "' --eval-fraction 0 a.txt");
  CHECK(e.code != 0);
  CHECK_THAT(e.out, Contains("leave the train or the val split empty"));
  CHECK(!fs::exists(d / "out"));
}

}  // namespace test_tokenizer_pack
