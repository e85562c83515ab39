#include "data/token_file.h"
#include <cstring>
#include "core/error.h"
#include "core/little_endian.h"

namespace tr::data {

TokenFileView parse_token_file(const uint8_t* bytes, size_t size, const std::string& path, const std::string& format) {
  TR_CHECK(format == "auto" || format == "nanogpt" || format == "llmc", "token file ", path, ": format '", format,
           "' is not one of auto, nanogpt, llmc");
  const bool llmc_magic = size >= 4 && int32_t(le32(bytes)) == kLlmcMagic;
  const std::string f = format == "auto" ? (llmc_magic ? "llmc" : "nanogpt") : format;
  TokenFileView v;
  v.format = f;
  if (f == "nanogpt") {
    TR_CHECK(size % 2 == 0, "token file ", path, ": ", size,
             " bytes is no whole number of uint16 tokens (nanoGPT's layout: the tokens alone); the file is cut short "
             "or is not a token file");
    v.tokens = bytes;
    v.count = int64_t(size / 2);
    v.width = 2;
    return v;
  }
  TR_CHECK(size >= kLlmcHeaderBytes, "token file ", path, ": ", size, " bytes is shorter than llm.c's ",
           kLlmcHeaderBytes, "-byte header");
  TR_CHECK(llmc_magic, "token file ", path, ": the header's magic is ", int32_t(le32(bytes)), ", llm.c's is ",
           kLlmcMagic, " (format = \"llmc\"; a nanoGPT file has no header: format = \"nanogpt\")");
  const int32_t version = int32_t(le32(bytes + 4)), count = int32_t(le32(bytes + 8));
  TR_CHECK(version == 1 || version == 2, "token file ", path, ": llm.c header version ", version,
           " is not 1 (uint16 tokens) or 2 (uint32 tokens)");
  TR_CHECK(count >= 0, "token file ", path, ": the header's token count ", count, " is negative");
  v.width = version == 1 ? 2 : 4;
  const size_t want = kLlmcHeaderBytes + size_t(count) * size_t(v.width);
  TR_CHECK(size == want, "token file ", path, ": the header says ", count, " tokens of ", v.width, " bytes (", want,
           " bytes with the header), the file has ", size,
           size < want ? ": it is cut short" : ": bytes follow the tokens");
  v.tokens = bytes + kLlmcHeaderBytes;
  v.count = count;
  return v;
}

std::vector<uint8_t> write_token_file(const std::vector<uint32_t>& tokens, const std::string& format,
                                      int llmc_version) {
  TR_CHECK(format == "nanogpt" || format == "llmc", "write_token_file: format '", format, "' is not nanogpt or llmc");
  TR_CHECK(llmc_version == 1 || (llmc_version == 2 && format == "llmc"), "write_token_file: llm.c version ",
           llmc_version, " with format ", format, " (version 2, uint32 tokens, is format llmc only)");
  std::vector<uint8_t> out;
  if (format == "llmc") {
    TR_CHECK(tokens.size() <= size_t(INT32_MAX), "write_token_file: ", tokens.size(),
             " tokens exceed llm.c's int32 count");
    put_le32(out, uint32_t(kLlmcMagic));
    put_le32(out, uint32_t(llmc_version));
    put_le32(out, uint32_t(tokens.size()));
    out.resize(kLlmcHeaderBytes, 0);
  }
  if (llmc_version == 2) {
    out.reserve(out.size() + tokens.size() * 4);
    for (uint32_t t : tokens) put_le32(out, t);
    return out;
  }
  out.reserve(out.size() + tokens.size() * 2);
  for (size_t i = 0; i < tokens.size(); ++i) {
    TR_CHECK(tokens[i] < 65536, "write_token_file: token ", tokens[i], " at ", i, " does not fit uint16");
    out.push_back(uint8_t(tokens[i]));
    out.push_back(uint8_t(tokens[i] >> 8));
  }
  return out;
}

}  // namespace tr::data
