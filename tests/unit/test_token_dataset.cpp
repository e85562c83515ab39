// Token files (data/token_file.h) and TokenDataset: files written by nanoGPT's and llm.c's own
// code paths (tests/fixtures/generators/make_token_fixtures.py) read back exactly; our writer round-trips;
// every damaged file is one error naming it; windows, and the vocabulary check (test_token_shards.cpp:
// many files).
#include <catch2/catch.hpp>
#include <fstream>
#include "core/error.h"
#include "data/token_dataset.h"
#include "data/token_file.h"
#include "unit/temp_dir.h"

namespace test_token_dataset {

using namespace tr;
using namespace tr::data;
using Catch::Matchers::Contains;

namespace {

std::vector<uint32_t> fixture_ids() {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 300; ++i) ids.push_back(i);
  ids.push_back(65535);
  ids.push_back(1000);
  return ids;
}

std::vector<int64_t> read_all(const std::vector<uint8_t>& bytes, const std::string& format) {
  TokenFileView v = parse_token_file(bytes.data(), bytes.size(), "mem", format);
  std::vector<int64_t> r;
  for (int64_t i = 0; i < v.count; ++i) r.push_back(v.at(i));
  return r;
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("token files: nanoGPT's and llm.c's, written by their code, read back exactly", "[data][tokens]") {
  const std::vector<uint32_t> ids = fixture_ids();
  const std::vector<int64_t> want(ids.begin(), ids.end());
  for (const char* name : {"tokens_nanogpt.bin", "tokens_llmc.bin"}) {
    INFO(name);
    const std::vector<uint8_t> b = file_bytes(std::string(TRAINER_FIXTURES_DIR) + "/" + name);
    REQUIRE(!b.empty());
    CHECK(read_all(b, "auto") == want);
    TokenFileView v = parse_token_file(b.data(), b.size(), name, "auto");
    CHECK(v.format == (std::string(name) == "tokens_llmc.bin" ? "llmc" : "nanogpt"));
    // our writer makes the same bytes
    CHECK(write_token_file(ids, v.format) == b);
  }
}

TEST_CASE("token files: a damaged file is one error naming it and what was expected", "[data][tokens]") {
  const std::vector<uint8_t> llmc = write_token_file(fixture_ids(), "llmc");
  auto err = [](std::vector<uint8_t> b, const std::string& format) {
    try {
      parse_token_file(b.data(), b.size(), "d/x.bin", format);
    } catch (const Error& e) { return std::string(e.what()); }
    return std::string("no error");
  };
  CHECK_THAT(err({1, 2, 3}, "nanogpt"), Contains("d/x.bin") && Contains("3 bytes is no whole number of uint16 tokens"));
  std::vector<uint8_t> cut(llmc.begin(), llmc.end() - 3);
  CHECK_THAT(err(cut, "auto"), Contains("d/x.bin") && Contains("302 tokens") && Contains("cut short"));
  std::vector<uint8_t> longer = llmc;
  longer.push_back(0);
  longer.push_back(0);
  CHECK_THAT(err(longer, "auto"), Contains("bytes follow the tokens"));
  std::vector<uint8_t> magic = llmc;
  magic[0] ^= 1;
  CHECK_THAT(err(magic, "llmc"), Contains("magic") && Contains("20240520"));
  std::vector<uint8_t> version = llmc;
  version[4] = 7;
  CHECK_THAT(err(version, "auto"), Contains("version 7"));
  CHECK_THAT(err(std::vector<uint8_t>(100, 0), "llmc"), Contains("shorter than llm.c's 1024-byte header"));
  CHECK_THAT(err(llmc, "gpt2"), Contains("format 'gpt2'"));
}

TEST_CASE("TokenDataset: strided and overlapping windows, the vocabulary check, short files", "[data][tokens]") {
  TempDir tmp;
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 41; ++i) ids.push_back(i * 3 % 50);
  const std::vector<uint8_t> b = write_token_file(ids, "llmc");
  std::ofstream(tmp / "t.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  TokenDataset::Options o;
  o.paths = {tmp / "t.bin"};
  o.block_size = 8;
  TokenDataset strided(o);
  CHECK(strided.size() == 5);  // (41 - 1) / 8
  Example e = strided.get(2);  // s = 16
  CHECK(e.input.select(0, 0).item() == 16 * 3 % 50);
  CHECK(e.target.select(0, 7).item() == 24 * 3 % 50);
  o.overlapping = true;
  TokenDataset every(o);
  CHECK(every.size() == 33);
  CHECK(every.get(5).input.select(0, 0).item() == 15);
  Example batch = every.get_batch({0, 32});
  CHECK(batch.input.sizes() == Shape{2, 8});
  CHECK(batch.target.select(0, 1).select(0, 7).item() == 40 * 3 % 50);
  o.vocab_size = 48;  // checked as windows are read
  TokenDataset small_vocab(o);
  CHECK_NOTHROW(small_vocab.get(7));  // tokens 7..15
  CHECK_THROWS_WITH(small_vocab.get(8),
                    Contains("t.bin") && Contains("token 16 is 48, outside the model's vocabulary of 48"));
  o.vocab_size = 0;
  o.block_size = 41;
  CHECK_THROWS_WITH(TokenDataset(o), Contains("41 tokens are fewer than one window of block_size + 1 = 42"));
  o.paths = {tmp / "none.bin"};
  CHECK_THROWS_WITH(TokenDataset(o), Contains("none.bin"));
}

}  // namespace test_token_dataset
