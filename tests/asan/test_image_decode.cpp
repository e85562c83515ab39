// Image decoding under AddressSanitizer and UBSan: every prefix of a PNG and of a JPEG (and a few
// bytes flipped) either decodes within its buffer or fails with an Error; resize stays in bounds.
#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include "core/error.h"
#include "data/image_decode.h"

namespace test_image_decode {

using namespace tr;
using namespace tr::data;

TEST_CASE("image decoding: prefixes and flipped bytes of PNG and JPEG files stay inside the buffer", "[asan][image]") {
  std::mt19937 gen(3);
  for (const char* name : {"train/cat/a.png", "train/cat/b.jpg", "train/dog/d.PNG"}) {
    std::ifstream f(std::string(TRAINER_FIXTURES_DIR) + "/image_folder/" + name, std::ios::binary);
    const std::vector<uint8_t> full((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    REQUIRE(!full.empty());
    for (size_t n = 0; n <= full.size(); n += (n < 64 ? 1 : 7)) {
      std::vector<uint8_t> b(full.begin(), full.begin() + long(n));
      for (int flip = 0; flip < 2; ++flip) {
        if (flip && !b.empty()) b[gen() % b.size()] ^= uint8_t(1 + gen() % 255);
        for (int channels : {1, 3}) {
          try {
            const DecodedImage img = decode_image(b.data(), b.size(), channels, name);
            const DecodedImage r = resize_bilinear(img, 7, 3);
            CHECK(r.pixels.size() == size_t(7 * 3 * channels));
          } catch (const Error&) {}
        }
      }
    }
  }
}

}  // namespace test_image_decode
