// The token-file format layer under AddressSanitizer and UBSan: every prefix of an llm.c file and
// of a nanoGPT file, and random bytes, either parse within the buffer or fail with an Error.
#include <catch2/catch.hpp>
#include <random>
#include "core/error.h"
#include "data/token_file.h"

namespace test_token_file_format {

using namespace tr;
using namespace tr::data;

namespace {
// parses a copy of exactly n bytes (no slack after it for an overread to hide in), reads every token
void parse_exact(const std::vector<uint8_t>& src, size_t n, const std::string& format) {
  std::vector<uint8_t> b(src.begin(), src.begin() + long(n));
  try {
    TokenFileView v = parse_token_file(b.data(), b.size(), "t.bin", format);
    int64_t sum = 0;
    for (int64_t i = 0; i < v.count; ++i) sum += v.at(i);
    CHECK(sum >= 0);
  } catch (const Error&) {}
}
}  // namespace

TEST_CASE("token files: every prefix and random bytes stay inside the buffer", "[asan][tokens]") {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 600; ++i) ids.push_back(i * 977 % 65536);
  for (const char* format : {"llmc", "nanogpt"}) {
    const std::vector<uint8_t> full = write_token_file(ids, format);
    for (size_t n = 0; n <= full.size(); ++n)
      for (const char* as : {"auto", "llmc", "nanogpt"}) parse_exact(full, n, as);
  }
  std::mt19937 gen(7);
  for (int k = 0; k < 2000; ++k) {
    std::vector<uint8_t> b(size_t(gen() % 2100));
    for (auto& x : b) x = uint8_t(gen());
    if (b.size() >= 12 && k % 2 == 0) {                    // a real magic, random version and count
      b[0] = 0x88, b[1] = 0xd8, b[2] = 0x34, b[3] = 0x01;  // 20240520, little-endian
    }
    parse_exact(b, b.size(), "auto");
  }
}

}  // namespace test_token_file_format
