// GPT2PreTokenizer: GPT-2's pre-tokenising regex, which cuts text into the pieces BPE merges
// within (tokenizers' pre_tokenizers.ByteLevel, OpenAI's encoder.py `pat`), run by PCRE2 in UTF
// and Unicode-property mode, JIT-compiled where PCRE2 has a JIT for the machine.
#pragma once
#include <functional>
#include <memory>
#include <string_view>

namespace tr::data {

class GPT2PreTokenizer {
 public:
  // OpenAI's pattern, with `\s` written as Oniguruma's \s (what tokenizers runs and the fixtures
  // check): \t \n \v \f \r, U+0085 and the separators \p{Z}. PCRE2's own \s also counts U+180E
  // (MONGOLIAN VOWEL SEPARATOR, a format character since Unicode 6.3) as a space, Onig and
  // Python's `regex` module do not.
  static constexpr const char* kPattern =
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\t-\r\x{85}\p{Z}\p{L}\p{N}]+)"
      R"(|[\t-\r\x{85}\p{Z}]+(?![^\t-\r\x{85}\p{Z}])|[\t-\r\x{85}\p{Z}]+)";

  GPT2PreTokenizer();
  ~GPT2PreTokenizer();
  GPT2PreTokenizer(const GPT2PreTokenizer&) = delete;
  GPT2PreTokenizer& operator=(const GPT2PreTokenizer&) = delete;

  // Calls piece(p) for each piece of `text`, in order; the pieces concatenate to `text`. Valid
  // UTF-8 is cut exactly as the pattern cuts it. Bytes that are not UTF-8 match no part of the
  // pattern: each run of them between matches is a piece of its own, so no byte is lost.
  void split(std::string_view text, const std::function<void(std::string_view)>& piece) const;

  bool jit() const { return jit_; }  // false: PCRE2's interpreter (no JIT for this machine)

 private:
  struct Regex;
  std::unique_ptr<Regex> re_;
  bool jit_ = false;
};

}  // namespace tr::data
