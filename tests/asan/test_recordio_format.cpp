// The RecordIO layer under AddressSanitizer and UBSan: every prefix of a file with a multi-part
// record read at every offset, and random bytes, either give a payload or fail with an Error.
#include <catch2/catch.hpp>
#include <random>
#include "core/error.h"
#include "data/recordio.h"

namespace test_recordio_format {

using namespace tr;
using namespace tr::data;

TEST_CASE("RecordIO: every prefix, every offset and random bytes stay inside the buffer", "[asan][recordio]") {
  std::vector<uint8_t> payload(60, 5);
  for (size_t at : {24u, 32u})
    payload[at] = 0x0a, payload[at + 1] = 0x23, payload[at + 2] = 0xd7, payload[at + 3] = 0xce;
  std::vector<uint8_t> file = write_record(payload);
  const std::vector<uint8_t> second = write_record(std::vector<uint8_t>(7, 1));
  file.insert(file.end(), second.begin(), second.end());
  for (size_t n = 0; n <= file.size(); ++n) {
    std::vector<uint8_t> b(file.begin(), file.begin() + long(n));
    for (uint64_t off = 0; off <= n + 4; ++off) {
      try {
        const std::vector<uint8_t> p = read_record(b.data(), b.size(), off, "t.rec");
        try {
          (void)unpack_image_record(p, "t.rec");
        } catch (const Error&) {}
      } catch (const Error&) {}
    }
  }
  std::mt19937 gen(5);
  for (int k = 0; k < 3000; ++k) {
    std::vector<uint8_t> b(size_t(gen() % 80));
    for (auto& x : b) x = uint8_t(gen());
    if (b.size() >= 8 && k % 2 == 0) b[0] = 0x0a, b[1] = 0x23, b[2] = 0xd7, b[3] = 0xce;
    try {
      (void)read_record(b.data(), b.size(), 0, "t.rec");
    } catch (const Error&) {}
  }
}

}  // namespace test_recordio_format
