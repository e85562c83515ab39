// Token files of language-model data, the two layouts users bring:
//   nanoGPT: the tokens as little-endian uint16, nothing else (prepare.py's train.bin / val.bin);
//   llm.c:   a header of 256 little-endian int32 (magic 20240520, version, token count, zeros),
//            then the tokens: uint16 for version 1 (GPT-2's), uint32 for version 2 (llama 3's).
// The format layer over bytes alone (no tensor: it also builds into the sanitizer test binary);
// errors name the file and what was expected.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tr::data {

inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr size_t kLlmcHeaderBytes = 256 * 4;

struct TokenFileView {
  const uint8_t* tokens = nullptr;  // the first token
  int64_t count = 0;
  int width = 2;       // bytes per token
  std::string format;  // "nanogpt" | "llmc"
  int64_t at(int64_t i) const {
    if (width == 2) return int64_t(uint16_t(tokens[2 * i] | (tokens[2 * i + 1] << 8)));
    const uint8_t* p = tokens + 4 * i;
    return int64_t(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
  }
};

// The tokens of a file's bytes. format: "auto" (llm.c when the first int32 is its magic, else
// nanoGPT), "nanogpt" or "llmc".
TokenFileView parse_token_file(const uint8_t* bytes, size_t size, const std::string& path, const std::string& format);

// The bytes of a token file holding `tokens` (each < 2^16 for nanoGPT and llm.c version 1).
// llmc_version 2 (format "llmc" only): llm.c's header with version 2 and uint32 tokens, for
// vocabularies over 65536.
std::vector<uint8_t> write_token_file(const std::vector<uint32_t>& tokens, const std::string& format,
                                      int llmc_version = 1);

}  // namespace tr::data
