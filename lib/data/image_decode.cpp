#include "data/image_decode.h"
#include <png.h>
#include <turbojpeg.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include "core/error.h"

namespace tr::data {

namespace {

bool is_png(const uint8_t* d, size_t n) { return n >= 8 && std::memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0; }
bool is_jpeg(const uint8_t* d, size_t n) { return n >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff; }

// A header's size is checked before the pixels are allocated: a few hundred bytes can claim
// 65535 x 65535 pixels. The limit is PIL's (DecompressionBombError above 2 * MAX_IMAGE_PIXELS).
void check_pixels(uint64_t width, uint64_t height, const std::string& where) {
  TR_CHECK(width * height <= kMaxImagePixels, where, ": ", width, " x ", height, " pixels exceed the limit of ",
           kMaxImagePixels, " (PIL's decompression-bomb limit): a damaged or hostile image");
}

// RGBA out of libpng's simplified API (8-bit sources come back unchanged; gray replicated), the
// alpha then dropped, as PIL's convert("RGB") drops it
DecodedImage decode_png(const uint8_t* data, size_t size, const std::string& where) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  TR_CHECK(png_image_begin_read_from_memory(&img, data, size) != 0, where,
           ": not a readable PNG (libpng: ", img.message, ")");
  check_pixels(img.width, img.height, where);
  img.format = PNG_FORMAT_RGBA;
  std::vector<uint8_t> rgba(PNG_IMAGE_SIZE(img));
  const bool ok = png_image_finish_read(&img, nullptr, rgba.data(), 0, nullptr) != 0;
  const std::string msg = img.message;
  png_image_free(&img);
  TR_CHECK(ok, where, ": a damaged PNG (libpng: ", msg, ")");
  DecodedImage out;
  out.height = img.height;
  out.width = img.width;
  out.channels = 3;
  out.pixels.resize(size_t(out.height * out.width * 3));
  for (size_t k = 0; k < size_t(out.height * out.width); ++k)
    for (size_t c = 0; c < 3; ++c) out.pixels[k * 3 + c] = rgba[k * 4 + c];
  return out;
}

DecodedImage decode_jpeg(const uint8_t* data, size_t size, const std::string& where) {
  const int channels = 3;
  std::unique_ptr<void, int (*)(tjhandle)> tj(tjInitDecompress(), tjDestroy);
  TR_CHECK(tj, where, ": cannot start TurboJPEG");
  int w = 0, h = 0, sub = 0, space = 0;
  TR_CHECK(tjDecompressHeader3(tj.get(), data, static_cast<unsigned long>(size), &w, &h, &sub, &space) == 0, where,
           ": not a readable JPEG (TurboJPEG: ", tjGetErrorStr2(tj.get()), ")");
  check_pixels(uint64_t(w), uint64_t(h), where);
  DecodedImage out;
  out.height = h;
  out.width = w;
  out.channels = channels;
  out.pixels.resize(size_t(w) * size_t(h) * size_t(channels));
  // TJFLAG_ACCURATEDCT: the IDCT libjpeg (and PIL) use by default
  TR_CHECK(tjDecompress2(tj.get(), data, static_cast<unsigned long>(size), out.pixels.data(), w, 0, h, TJPF_RGB,
                         TJFLAG_ACCURATEDCT) == 0,
           where, ": a damaged JPEG (TurboJPEG: ", tjGetErrorStr2(tj.get()), ")");
  return out;
}

}  // namespace

bool is_encoded_image(const uint8_t* data, size_t size) { return is_png(data, size) || is_jpeg(data, size); }

DecodedImage decode_image(const uint8_t* data, size_t size, int channels, const std::string& where) {
  TR_CHECK(channels == 1 || channels == 3, where, ": ", channels, " channels; images decode to 1 (gray) or 3 (RGB)");
  DecodedImage rgb;
  if (is_png(data, size))
    rgb = decode_png(data, size, where);
  else if (is_jpeg(data, size))
    rgb = decode_jpeg(data, size, where);
  else
    throw Error(str(where, ": neither a PNG nor a JPEG (no signature of either in its first bytes)"));
  if (channels == 3) return rgb;
  // PIL's convert("L"): ITU-R 601-2 luma in 16-bit fixed point (a gray source comes back unchanged)
  DecodedImage l;
  l.height = rgb.height;
  l.width = rgb.width;
  l.channels = 1;
  l.pixels.resize(size_t(rgb.height * rgb.width));
  for (size_t k = 0; k < l.pixels.size(); ++k) {
    const uint32_t r = rgb.pixels[3 * k], g = rgb.pixels[3 * k + 1], b = rgb.pixels[3 * k + 2];
    l.pixels[k] = uint8_t((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
  }
  return l;
}

DecodedImage resize_bilinear(const DecodedImage& img, int64_t height, int64_t width) {
  if (img.height == height && img.width == width) return img;
  DecodedImage out;
  out.height = height;
  out.width = width;
  out.channels = img.channels;
  out.pixels.resize(size_t(height * width * img.channels));
  const float sy = float(img.height) / float(height), sx = float(img.width) / float(width);
  for (int64_t y = 0; y < height; ++y) {
    const float fy = std::max(0.0f, (float(y) + 0.5f) * sy - 0.5f);
    const int64_t y0 = std::min<int64_t>(int64_t(fy), img.height - 1), y1 = std::min<int64_t>(y0 + 1, img.height - 1);
    const float ly = fy - float(y0);
    for (int64_t x = 0; x < width; ++x) {
      const float fx = std::max(0.0f, (float(x) + 0.5f) * sx - 0.5f);
      const int64_t x0 = std::min<int64_t>(int64_t(fx), img.width - 1), x1 = std::min<int64_t>(x0 + 1, img.width - 1);
      const float lx = fx - float(x0);
      for (int64_t c = 0; c < img.channels; ++c) {
        auto at = [&](int64_t yy, int64_t xx) {
          return float(img.pixels[size_t((yy * img.width + xx) * img.channels + c)]);
        };
        const float v =
            (1 - ly) * ((1 - lx) * at(y0, x0) + lx * at(y0, x1)) + ly * ((1 - lx) * at(y1, x0) + lx * at(y1, x1));
        out.pixels[size_t((y * width + x) * img.channels + c)] = uint8_t(std::clamp(std::nearbyint(v), 0.0f, 255.0f));
      }
    }
  }
  return out;
}

}  // namespace tr::data
