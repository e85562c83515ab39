// PNG and JPEG decoding (libpng, TurboJPEG) to gray and RGB, then a bilinear resize.
#include "data/image_decode.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!tr::data::is_encoded_image(data, size)) return 0;
  for (int channels : {1, 3}) {
    tr::fuzz::expect_clean_error([&] {
      tr::data::DecodedImage img = tr::data::decode_image(data, size, channels, "fuzz image");
      if (size_t(img.height * img.width * img.channels) != img.pixels.size() || img.channels != channels)
        __builtin_trap();
      (void)tr::data::resize_bilinear(img, 7, 5);
    });
  }
  return 0;
}
