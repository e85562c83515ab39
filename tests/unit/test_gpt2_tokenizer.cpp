// GPT2Tokenizer (data/gpt2_tokenizer.h): the ids of held-out texts equal those tokenizers,
// GPT2TokenizerFast and GPT2Tokenizer give on the same vocab.json + merges.txt
// (tests/fixtures/generators/make_gpt2_bpe_fixtures.py); decode inverts encode on any bytes; the heap merge
// equals encoder.py's merge loop on long pieces; damaged files are one error naming file and fault.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <random>
#include "data/gpt2_pretokenizer.h"
#include "data/gpt2_tokenizer.h"
#include "data/token_file.h"
#include "unit/error_of.h"
#include "unit/fixtures.h"
#include "unit/temp_dir.h"

namespace test_gpt2_tokenizer {

using namespace tr;
using namespace tr::data;
using Catch::Matchers::Contains;

namespace {

const std::string kDir = std::string(TRAINER_FIXTURES_DIR) + "/gpt2_bpe";

GPT2Tokenizer& fixture_tokenizer() {
  static GPT2Tokenizer tok(kDir);
  return tok;
}

std::vector<std::string> pieces_of(std::string_view text) {
  static const GPT2PreTokenizer pre;
  std::vector<std::string> out;
  pre.split(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

// merges.txt as encoder.py reads it: (left bytes, right bytes) -> rank.
std::map<std::pair<std::string, std::string>, int> fixture_ranks() {
  std::map<char32_t, char> byte_of;
  for (int b = 0; b < 256; ++b) byte_of[bytes_to_unicode()[size_t(b)]] = char(b);
  const auto to_bytes = [&](const std::string& t) {  // byte characters are 1- or 2-byte UTF-8
    std::string out;
    for (size_t i = 0; i < t.size();) {
      const auto c = uint8_t(t[i]);
      const char32_t cp = c < 0x80 ? c : char32_t((c & 0x1F) << 6 | (uint8_t(t[i + 1]) & 0x3F));
      out.push_back(byte_of.at(cp));
      i += c < 0x80 ? 1 : 2;
    }
    return out;
  };
  std::map<std::pair<std::string, std::string>, int> ranks;
  std::ifstream f(kDir + "/merges.txt");
  int rank = 0;
  for (std::string line; std::getline(f, line);) {
    if (line.starts_with("#version")) continue;
    const size_t sp = line.find(' ');
    ranks.emplace(std::pair{to_bytes(line.substr(0, sp)), to_bytes(line.substr(sp + 1))}, rank++);
  }
  return ranks;
}

// OpenAI's encoder.py `bpe`: merge every occurrence of the lowest-ranked pair, left to right, until
// no pair has a rank; then the ids of the parts.
std::vector<uint32_t> reference_bpe(const std::string& piece,
                                    const std::map<std::pair<std::string, std::string>, int>& ranks,
                                    const std::map<std::string, uint32_t>& ids) {
  std::vector<std::string> word;
  for (char c : piece) word.emplace_back(1, c);
  while (word.size() > 1) {
    int best = INT32_MAX;
    for (size_t i = 0; i + 1 < word.size(); ++i)
      if (auto it = ranks.find({word[i], word[i + 1]}); it != ranks.end()) best = std::min(best, it->second);
    if (best == INT32_MAX) break;
    std::vector<std::string> merged;
    for (size_t i = 0; i < word.size(); ++i) {
      auto it = i + 1 < word.size() ? ranks.find({word[i], word[i + 1]}) : ranks.end();
      if (it != ranks.end() && it->second == best) {
        merged.push_back(word[i] + word[i + 1]);
        ++i;
      } else {
        merged.push_back(word[i]);
      }
    }
    word = std::move(merged);
  }
  std::vector<uint32_t> out;
  for (const std::string& w : word) out.push_back(ids.at(w));
  return out;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

std::string fixture_text(const std::string& name) { return read_file(kDir + "/" + name); }

}  // namespace

TEST_CASE("GPT-2 bytes_to_unicode: printable bytes are themselves, the other 68 from U+0100 in order", "[tokenizer]") {
  const std::vector<char32_t>& t = bytes_to_unicode();
  REQUIRE(t.size() == 256);
  CHECK(t['!'] == U'!');
  CHECK(t['~'] == U'~');
  CHECK(t[0xA1] == U'\u00A1');
  CHECK(t[0xAD] == U'\u0143');  // the soft hyphen: the 68th and last remapped byte
  CHECK(t[0] == U'\u0100');
  CHECK(t[' '] == U'\u0120');   // 'Ġ', the space in every GPT-2 vocabulary
  CHECK(t['\n'] == U'\u010A');  // 'Ċ'
  CHECK(t[0x7F] == U'\u0121');
  std::vector<char32_t> sorted(t);
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
  CHECK(sorted.back() == U'\u0143');
}

TEST_CASE("GPT2Tokenizer: the ids of held-out texts equal tokenizers' and transformers'", "[tokenizer]") {
  GPT2Tokenizer& tok = fixture_tokenizer();
  const nlohmann::json& fx = fixture_json("gpt2_bpe_fixtures.json");
  CHECK(tok.eot_token() == fx["eot"].get<uint32_t>());
  CHECK(tok.vocab_size() == fx["vocab_size"].get<uint32_t>());
  CHECK(tok.token_bytes(tok.eot_token()) == "<|endoftext|>");
  REQUIRE(fx["cases"].size() >= 40);
  for (const auto& c : fx["cases"]) {
    const std::string text = c["text"].get<std::string>();
    INFO(c["name"].get<std::string>());
    const std::vector<uint32_t> ids = tok.encode(text);
    CHECK(ids == c["ids"].get<std::vector<uint32_t>>());
    CHECK(tok.decode(ids) == text);
    CHECK(tok.encode(text) == ids);  // again, now from the cache
  }
}

TEST_CASE("GPT2PreTokenizer: GPT-2's pieces", "[tokenizer]") {
  using V = std::vector<std::string>;
  CHECK(pieces_of("Hello world's 123 abc") == V{"Hello", " world", "'s", " 123", " abc"});
  // whitespace before a word leaves its last character to the word (a space joins it, a newline
  // stands alone); at the end of the text a run stays whole
  CHECK(pieces_of("a   b\n\nc  ") == V{"a", "  ", " b", "\n", "\n", "c", "  "});
  CHECK(pieces_of("I'M  ok!?") == V{"I", "'", "M", " ", " ok", "!?"});  // the contractions are lowercase only
  CHECK(pieces_of("x1y") == V{"x", "1", "y"});
  CHECK(pieces_of("") == V{});
  // bytes that are not UTF-8 are pieces of their own between the pattern's matches
  CHECK(pieces_of("ab\xff\xfe cd\xc3") == V{"ab", "\xff\xfe", " cd", "\xc3"});
  CHECK(pieces_of("\x80") == V{"\x80"});
#if defined(__x86_64__) || defined(__aarch64__)
  CHECK(GPT2PreTokenizer().jit());  // PCRE2 has a JIT for these machines (Debian builds it in)
#endif
}

TEST_CASE("GPT2Tokenizer: decode(encode(x)) == x for any bytes, the special token's text is ordinary text",
          "[tokenizer]") {
  GPT2Tokenizer& tok = fixture_tokenizer();
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(char(b));
  CHECK(tok.decode(tok.encode(all)) == all);
  std::mt19937 rng(5);
  for (int k = 0; k < 200; ++k) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) c = char(rng() % 256);
    INFO(k);
    CHECK(tok.decode(tok.encode(s)) == s);
  }
  // a UTF-8 character cut in two tokens decodes to its bytes, not to a replacement character
  const std::vector<uint32_t> sun = tok.encode("\xe6\x97\xa5");  // '日', three byte tokens in this vocabulary
  REQUIRE(sun.size() == 3);
  CHECK(tok.decode({sun[0]}) == "\xe6");
  CHECK(tok.decode(sun) == "\xe6\x97\xa5");
  const std::vector<uint32_t> ids = tok.encode("a<|endoftext|>b");
  CHECK(std::find(ids.begin(), ids.end(), tok.eot_token()) == ids.end());
  CHECK(tok.decode(ids) == "a<|endoftext|>b");
  CHECK(tok.decode({tok.eot_token()}) == "<|endoftext|>");
}

TEST_CASE("GPT2Tokenizer: the heap merge equals encoder.py's merge loop on long and random pieces", "[tokenizer]") {
  GPT2Tokenizer& tok = fixture_tokenizer();
  const auto ranks = fixture_ranks();
  REQUIRE(ranks.size() == tok.vocab_size() - 257);  // a trained vocabulary: 256 bytes, <|endoftext|>, one per merge
  std::map<std::string, uint32_t> ids;
  for (uint32_t i = 0; i < tok.vocab_size(); ++i) ids[tok.token_bytes(i)] = i;
  std::vector<std::string> texts = {std::string(5000, 'e'), std::string(3001, ' '), "the" + std::string(2000, 'l'),
                                    std::string(4000, '\n')};
  std::string ab;
  for (int i = 0; i < 1500; ++i) ab += "thereinthe"[i % 10];
  texts.push_back(ab);
  std::mt19937 rng(11);
  const std::string alphabet = "etaoinshrdlu  \n'.,0123";
  for (int k = 0; k < 300; ++k) {
    std::string s(1 + rng() % 400, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    texts.push_back(s);
  }
  for (const std::string& text : texts) {
    std::vector<uint32_t> want;
    for (const std::string& p : pieces_of(text)) {
      const std::vector<uint32_t> part = reference_bpe(p, ranks, ids);
      want.insert(want.end(), part.begin(), part.end());
    }
    INFO(text.substr(0, 60));
    CHECK(tok.encode(text) == want);
  }
}

TEST_CASE("GPT2Tokenizer: a cache emptied when full gives the same ids", "[tokenizer]") {
  // 300k distinct number pieces (" 100000" ...) overflow the cache of 2^18 pieces more than once
  std::string text;
  for (int i = 100000; i < 400000; ++i) text += " " + std::to_string(i) + " the";
  GPT2Tokenizer tok(kDir);
  const std::vector<uint32_t> ids = tok.encode(text);
  CHECK(tok.encode(text) == ids);
  CHECK(tok.decode(ids) == text);
  std::vector<uint32_t> by_parts;
  GPT2Tokenizer fresh(kDir);
  for (size_t at = 0; at < text.size();) {  // parts cut before a space: the same pieces
    const size_t end = std::min(text.size(), text.find(' ', at + 70000));
    const std::vector<uint32_t> part = fresh.encode(std::string_view(text).substr(at, end - at));
    by_parts.insert(by_parts.end(), part.begin(), part.end());
    at = end;
  }
  CHECK(by_parts == ids);
}

TEST_CASE("GPT2Tokenizer: damaged files are one error naming the file and what is wrong", "[tokenizer]") {
  TempDir d;
  const std::string vocab = fixture_text("vocab.json"), merges = fixture_text("merges.txt");
  const auto load = [&](const std::string& v, const std::string& m) {
    write_text(d / "vocab.json", v);
    write_text(d / "merges.txt", m);
    return test::error_of([&] { GPT2Tokenizer t(d.path.string()); });
  };
  CHECK(load(vocab, merges) == "(no error)");
  CHECK(load(vocab, "#version: 0.2\r\nĠ t\r\nh e\r\n") == "(no error)");  // CRLF lines
  const std::string v = d / "vocab.json", m = d / "merges.txt";

  CHECK_THAT(test::error_of([&] { GPT2Tokenizer t(d / "nowhere"); }),
             Contains("cannot open vocab.json '" + d / "nowhere/vocab.json'") && Contains("No such file"));
  std::filesystem::remove(d / "merges.txt");
  CHECK_THAT(test::error_of([&] { GPT2Tokenizer t(d.path.string()); }), Contains("cannot open merges.txt '" + m + "'"));

  // vocab.json
  CHECK_THAT(load("{\"a\": 1,", merges), Contains(v + " is not valid JSON"));
  CHECK_THAT(load("[1, 2]", merges), Contains(v + " must be a JSON object of token -> id") && Contains("it is array"));
  CHECK_THAT(load("{}", merges), Contains("it is empty"));
  CHECK_THAT(load(vocab.substr(0, vocab.size() - 1) + ",\"zz\":-3}", merges),
             Contains(v + ": the id of 'zz' is -3, not a non-negative integer"));
  CHECK_THAT(load(vocab.substr(0, vocab.size() - 1) + ",\"zz\":2.5}", merges), Contains("the id of 'zz' is 2.5"));
  CHECK_THAT(load(vocab.substr(0, vocab.size() - 1) + ",\"zz\":5000}", merges),
             Contains("the id of 'zz' is 5000 but the file has 2001 tokens: ids must be 0..2000"));
  CHECK_THAT(load(vocab.substr(0, vocab.size() - 1) + ",\"zz\":7,\"zy\":2001}", merges),
             Contains("have the same id 7"));
  CHECK_THAT(load(vocab.substr(0, vocab.size() - 1) + ",\"a b\":2000}", merges),
             Contains(v + ": the token 'a b' has the character U+0020, which is none of GPT-2's 256 byte characters"));
  std::string renamed = vocab;
  renamed.replace(renamed.find("\"a\":"), 4, "\"aaaaaaaaaaaaaaa\":");
  CHECK_THAT(load(renamed, merges), Contains(v + " has no token for the byte 97 (written 'a')"));
  std::string no_eot = vocab;
  no_eot.replace(no_eot.find("<|endoftext|>"), 13, "<|endofteyt|>");
  CHECK_THAT(load(no_eot, merges), Contains(v + " has no token '<|endoftext|>'"));

  // merges.txt
  CHECK_THAT(load(vocab, "#version: 0.2\nĠ t\nhe\n"),
             Contains(m + " line 3: 'he' is not two tokens separated by one space"));
  CHECK_THAT(load(vocab, "Ġ t\n\nh e\n"), Contains(m + " line 2: '' is not two tokens"));
  CHECK_THAT(load(vocab, "Ġ t h\n"), Contains(m + " line 1: 'Ġ t h' is not two tokens"));
  CHECK_THAT(load(vocab, "Ġ  t\n"), Contains("line 1: 'Ġ  t' is not two tokens"));
  CHECK_THAT(load(vocab, "Ġ t\nqqqq e\n"), Contains(m + " line 2: the merge's part 'qqqq' is not in vocab.json"));
  CHECK_THAT(load(vocab, "Ġ t\nq z\n"), Contains(m + " line 2: the merged token 'qz' is not in vocab.json"));
  CHECK_THAT(load(vocab, "Ġ t\na \xff\n"), Contains(m + " line 2: the token '\xff' is not valid UTF-8"));

  // ids out of the vocabulary
  GPT2Tokenizer& tok = fixture_tokenizer();
  CHECK_THAT(test::error_of([&] {
               tok.decode({1, 2000});
             }),
             Contains("decode: the id 2000 at position 1 is out of the vocabulary (2000 tokens)"));
  CHECK_THAT(test::error_of([&] { tok.token_bytes(70000); }), Contains("token id 70000 is out of the vocabulary"));
}

TEST_CASE("write_token_file: llm.c version 2 holds uint32 tokens and reads back", "[tokenizer][tokens]") {
  const std::vector<uint32_t> ids = {0, 1, 65535, 65536, 100277, 4000000000u};
  const std::vector<uint8_t> bytes = write_token_file(ids, "llmc", 2);
  REQUIRE(bytes.size() == kLlmcHeaderBytes + 4 * ids.size());
  CHECK((bytes[4] == 2 && bytes[5] == 0 && bytes[8] == ids.size()));
  const TokenFileView view = parse_token_file(bytes.data(), bytes.size(), "mem", "auto");
  CHECK(view.width == 4);
  REQUIRE(view.count == int64_t(ids.size()));
  for (size_t i = 0; i < ids.size(); ++i) CHECK(view.at(int64_t(i)) == int64_t(ids[i]));
  CHECK(write_token_file({7, 8}, "llmc") == write_token_file({7, 8}, "llmc", 1));
  CHECK_THAT(test::error_of([] { write_token_file({1}, "nanogpt", 2); }),
             Contains("version 2, uint32 tokens, is format llmc only"));
  CHECK_THAT(test::error_of([] { write_token_file({1}, "llmc", 3); }), Contains("llm.c version 3"));
  CHECK_THAT(test::error_of([] { write_token_file({65536}, "llmc"); }), Contains("does not fit uint16"));
}

}  // namespace test_gpt2_tokenizer
