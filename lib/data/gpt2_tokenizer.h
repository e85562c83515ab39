// GPT2Tokenizer: GPT-2's byte-level BPE from the files GPT-2 ships (vocab.json + merges.txt, as
// OpenAI publishes them and tokenizers' ByteLevelBPETokenizer.save_model writes them). Text is cut
// by GPT-2's regex (GPT2PreTokenizer); each piece's bytes start as one token per byte and the
// merges are applied lowest rank first (leftmost first among equals) until none applies. The ids
// equal tokenizers' / transformers' GPT2TokenizerFast's / tiktoken's encode_ordinary on the same files.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>
#include "data/gpt2_pretokenizer.h"

namespace tr::data {

// GPT-2's bytes_to_unicode: the character each byte is written as in vocab.json and merges.txt.
// The printable bytes '!'..'~', U+00A1..U+00AC, U+00AE..U+00FF stand for themselves; the other 68
// bytes, in order, are U+0100, U+0101, ... (so that no token's text holds a space or a control).
const std::vector<char32_t>& bytes_to_unicode();

class GPT2Tokenizer {
 public:
  static constexpr const char* kEndOfText = "<|endoftext|>";

  // Reads dir/vocab.json and dir/merges.txt.
  explicit GPT2Tokenizer(const std::string& dir);
  GPT2Tokenizer(const std::string& vocab_path, const std::string& merges_path);

  // The ids of `text` read as ordinary text: "<|endoftext|>" in it is text, not the special token
  // (tiktoken's encode_ordinary). Any bytes encode; decode gives them back.
  // Not thread-safe: it fills the cache of pieces already merged.
  std::vector<uint32_t> encode(std::string_view text);
  // The tokens' bytes concatenated (not necessarily UTF-8: a character may span tokens).
  std::string decode(const std::vector<uint32_t>& ids) const;

  uint32_t eot_token() const { return eot_; }                      // the id of <|endoftext|> in vocab.json
  uint32_t vocab_size() const { return uint32_t(bytes_.size()); }  // the largest id + 1
  const std::string& token_bytes(uint32_t id) const;
  const GPT2PreTokenizer& pre_tokenizer() const { return pre_; }

 private:
  struct Merge {
    uint32_t rank;  // the line of merges.txt, from 0: lower merges first
    uint32_t id;    // the merged token
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  static uint64_t pair_key(uint32_t a, uint32_t b) { return uint64_t(a) << 32 | b; }

  void load_vocab(const std::string& path);
  void load_merges(const std::string& path);
  // Appends the BPE tokens of one piece to `out`.
  void bpe(std::string_view piece, std::vector<uint32_t>& out);

  GPT2PreTokenizer pre_;
  std::vector<std::string> bytes_;                 // id -> the token's bytes
  std::unordered_map<std::string, uint32_t> ids_;  // the token's bytes -> id
  uint32_t byte_ids_[256] = {};                    // the single-byte tokens: BPE's starting point
  std::unordered_map<uint64_t, Merge> merges_;
  uint32_t eot_ = 0;

  // Pieces already merged (GPT-2's encoder.py `cache`): piece -> [begin, end) of cache_ids_.
  // Emptied when it reaches kCacheEntries, so that it stays bounded on any corpus.
  static constexpr size_t kCacheEntries = size_t(1) << 18;
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, StringHash, std::equal_to<>> cache_;
  std::vector<uint32_t> cache_ids_;
};

}  // namespace tr::data
