#include "data/gpt2_tokenizer.h"
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include "core/error.h"

namespace tr::data {

const std::vector<char32_t>& bytes_to_unicode() {
  static const std::vector<char32_t> table = [] {
    std::vector<char32_t> t(256);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[size_t(b)] = printable ? char32_t(b) : next++;
    }
    return t;
  }();
  return table;
}

namespace {

// A byte character (bytes_to_unicode: all below U+0800) as UTF-8, for messages.
std::string utf8(char32_t cp) {
  if (cp < 0x80) return std::string(1, char(cp));
  return {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
}

std::string code_point(char32_t cp) {
  char b[16];
  std::snprintf(b, sizeof b, "U+%04X", unsigned(cp));
  return b;
}

std::string read_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  TR_CHECK(f.good(), "GPT2Tokenizer: cannot open ", what, " '", path, "': ", std::strerror(errno));
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// The bytes a token's text in vocab.json or merges.txt stands for (bytes_to_unicode inverted).
// The text is valid UTF-8 (nlohmann::json checks vocab.json's; merges.txt's is checked here).
std::string token_text_to_bytes(std::string_view text, const std::string& where) {
  static const std::vector<int> byte_of = [] {
    std::vector<int> m(512, -1);
    for (int b = 0; b < 256; ++b) m[bytes_to_unicode()[size_t(b)]] = b;
    return m;
  }();
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const auto c0 = uint8_t(text[i]);
    const int len = c0 < 0x80 ? 1 : (c0 >> 5) == 0x6 ? 2 : (c0 >> 4) == 0xE ? 3 : (c0 >> 3) == 0x1E ? 4 : 0;
    TR_CHECK(len > 0 && i + size_t(len) <= text.size(), where, ": the token '", std::string(text),
             "' is not valid UTF-8");
    char32_t cp = len == 1 ? c0 : char32_t(c0 & (0x7F >> len));
    for (int k = 1; k < len; ++k) {
      const auto c = uint8_t(text[i + size_t(k)]);
      TR_CHECK((c >> 6) == 0x2, where, ": the token '", std::string(text), "' is not valid UTF-8");
      cp = cp << 6 | (c & 0x3F);
    }
    TR_CHECK(cp < byte_of.size() && byte_of[cp] >= 0, where, ": the token '", std::string(text), "' has the character ",
             code_point(cp),
             ", which is none of GPT-2's 256 byte characters (bytes_to_unicode): not a byte-level BPE file");
    out.push_back(char(byte_of[cp]));
    i += size_t(len);
  }
  return out;
}

}  // namespace

GPT2Tokenizer::GPT2Tokenizer(const std::string& dir) : GPT2Tokenizer(dir + "/vocab.json", dir + "/merges.txt") {}

GPT2Tokenizer::GPT2Tokenizer(const std::string& vocab_path, const std::string& merges_path) {
  load_vocab(vocab_path);
  load_merges(merges_path);
}

void GPT2Tokenizer::load_vocab(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path, "vocab.json"));
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(str("GPT2Tokenizer: ", path, " is not valid JSON: ", e.what()));
  }
  TR_CHECK(j.is_object() && !j.empty(), "GPT2Tokenizer: ", path,
           " must be a JSON object of token -> id (GPT-2's vocab.json), it is ",
           j.is_object() ? "empty" : j.type_name());
  bytes_.assign(j.size(), std::string());
  std::vector<const std::string*> text_of(j.size(), nullptr);  // for errors: the entry that has an id
  for (const auto& [text, id] : j.items()) {
    TR_CHECK(id.is_number_unsigned(), "GPT2Tokenizer: ", path, ": the id of '", text, "' is ", id.dump(),
             ", not a non-negative integer");
    const uint64_t i = id.get<uint64_t>();
    // Ids are 0..n-1, as GPT-2's file and every save_model writes them: a gap is a damaged file.
    TR_CHECK(i < j.size(), "GPT2Tokenizer: ", path, ": the id of '", text, "' is ", i, " but the file has ", j.size(),
             " tokens: ids must be 0..", j.size() - 1);
    TR_CHECK(!text_of[i], "GPT2Tokenizer: ", path, ": '", *text_of[i], "' and '", text, "' have the same id ", i);
    text_of[i] = &text;
    bytes_[i] = token_text_to_bytes(text, "GPT2Tokenizer: " + path);
    TR_CHECK(!bytes_[i].empty(), "GPT2Tokenizer: ", path, ": the token of id ", i, " is empty");
    ids_.emplace(bytes_[i], uint32_t(i));
  }
  for (int b = 0; b < 256; ++b) {
    auto it = ids_.find(std::string(1, char(b)));
    TR_CHECK(it != ids_.end(), "GPT2Tokenizer: ", path, " has no token for the byte ", b, " (written '",
             utf8(bytes_to_unicode()[size_t(b)]), "'): a byte-level BPE vocabulary has one for each of the 256 bytes");
    byte_ids_[b] = it->second;
  }
  auto eot = ids_.find(kEndOfText);
  TR_CHECK(eot != ids_.end(), "GPT2Tokenizer: ", path, " has no token '", kEndOfText,
           "' (GPT-2's end of text, the special token that separates documents)");
  eot_ = eot->second;
}

void GPT2Tokenizer::load_merges(const std::string& path) {
  const std::string text = read_file(path, "merges.txt");
  size_t line_no = 0;
  uint32_t rank = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF: '\r' is no token's character
    if (line.starts_with("#version")) continue;                       // save_model's "#version: 0.2"
    const std::string where = str("GPT2Tokenizer: ", path, " line ", line_no);
    const size_t sp = line.find(' ');
    TR_CHECK(sp != std::string_view::npos && sp > 0 && sp + 1 < line.size() &&
                 line.find(' ', sp + 1) == std::string_view::npos,
             where, ": '", std::string(line), "' is not two tokens separated by one space");
    const std::string a = token_text_to_bytes(line.substr(0, sp), where),
                      b = token_text_to_bytes(line.substr(sp + 1), where);
    auto ia = ids_.find(a), ib = ids_.find(b), iab = ids_.find(a + b);
    for (auto [it, part] : {std::pair{ia, line.substr(0, sp)}, std::pair{ib, line.substr(sp + 1)}})
      TR_CHECK(it != ids_.end(), where, ": the merge's part '", std::string(part), "' is not in vocab.json");
    TR_CHECK(iab != ids_.end(), where, ": the merged token '", std::string(line.substr(0, sp)),
             std::string(line.substr(sp + 1)), "' is not in vocab.json");
    // a pair listed twice keeps its first (lowest) rank, as a rank lookup of the file would
    merges_.emplace(pair_key(ia->second, ib->second), Merge{rank++, iab->second});
  }
}

void GPT2Tokenizer::bpe(std::string_view piece, std::vector<uint32_t>& out) {
  if (piece.size() == 1) {
    out.push_back(byte_ids_[uint8_t(piece[0])]);
    return;
  }
  if (auto it = cache_.find(piece); it != cache_.end()) {
    out.insert(out.end(), cache_ids_.begin() + it->second.first, cache_ids_.begin() + it->second.second);
    return;
  }
  // The symbols as a linked list over the piece's bytes (a merged symbol lives at its left
  // position); candidate merges in a min-heap by (rank, position). A candidate whose symbols have
  // changed since it was pushed no longer has its rank (each pair has one rank) and is dropped.
  struct Symbol {
    uint32_t id;
    int32_t prev, next;  // -1 at the ends; next == -2 marks a symbol merged into its left
  };
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  const int32_t n = int32_t(piece.size());
  std::vector<Symbol> sym(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i)
    sym[size_t(i)] = {byte_ids_[uint8_t(piece[size_t(i)])], i - 1, i + 1 < n ? i + 1 : -1};
  std::vector<Candidate> heap;
  const auto push = [&](int32_t left) {
    if (left < 0 || sym[size_t(left)].next < 0) return;
    auto m = merges_.find(pair_key(sym[size_t(left)].id, sym[size_t(sym[size_t(left)].next)].id));
    if (m == merges_.end()) return;
    heap.push_back({m->second.rank, left});
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& l = sym[size_t(c.pos)];
    if (l.next < 0) continue;  // merged away, or now last
    auto m = merges_.find(pair_key(l.id, sym[size_t(l.next)].id));
    if (m == merges_.end() || m->second.rank != c.rank) continue;
    Symbol& r = sym[size_t(l.next)];
    l.id = m->second.id;
    l.next = r.next;
    if (r.next >= 0) sym[size_t(r.next)].prev = c.pos;
    r.next = -2;
    push(l.prev);
    push(c.pos);
  }
  const size_t begin = out.size();
  for (int32_t i = 0; i >= 0; i = sym[size_t(i)].next) out.push_back(sym[size_t(i)].id);
  if (cache_.size() >= kCacheEntries) {
    cache_.clear();
    cache_ids_.clear();
  }
  const auto at = uint32_t(cache_ids_.size());
  cache_ids_.insert(cache_ids_.end(), out.begin() + ptrdiff_t(begin), out.end());
  cache_.emplace(std::string(piece), std::pair{at, uint32_t(cache_ids_.size())});
}

std::vector<uint32_t> GPT2Tokenizer::encode(std::string_view text) {
  std::vector<uint32_t> ids;
  ids.reserve(text.size() / 3);
  pre_.split(text, [&](std::string_view piece) { bpe(piece, ids); });
  return ids;
}

const std::string& GPT2Tokenizer::token_bytes(uint32_t id) const {
  TR_CHECK(id < bytes_.size(), "GPT2Tokenizer: token id ", id, " is out of the vocabulary (", bytes_.size(),
           " tokens)");
  return bytes_[id];
}

std::string GPT2Tokenizer::decode(const std::vector<uint32_t>& ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    TR_CHECK(ids[i] < bytes_.size(), "GPT2Tokenizer::decode: the id ", ids[i], " at position ", i,
             " is out of the vocabulary (", bytes_.size(), " tokens)");
    out += bytes_[ids[i]];
  }
  return out;
}

}  // namespace tr::data
