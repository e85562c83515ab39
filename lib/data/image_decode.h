// Image files as pixels: PNG through libpng's simplified API, JPEG through libjpeg-turbo's TurboJPEG,
// told apart by their signatures; RGB (3 channels; an alpha channel dropped) or grayscale (1:
// PIL's luma of the RGB), as PIL's convert("RGB") / convert("L") give them. And the resize of torchvision's Resize
// (bilinear, half-pixel centres, no antialias: torch.nn.functional.interpolate(mode="bilinear", align_corners=False)).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tr::data {

struct DecodedImage {
  int64_t height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;  // HWC, row-major
};

// Images with more pixels are refused before decoding, as PIL refuses them (2 * MAX_IMAGE_PIXELS).
inline constexpr uint64_t kMaxImagePixels = 2ull * 89478485ull;

// Whether the bytes start with a PNG or a JPEG signature.
bool is_encoded_image(const uint8_t* data, size_t size);
// The image in `channels` (1 or 3) channels; an Error naming `where` for a damaged or unknown file.
DecodedImage decode_image(const uint8_t* data, size_t size, int channels, const std::string& where);
// Bilinear resize to height x width, each channel apart, values rounded to u8 as torchvision rounds
// a uint8 tensor's resize (computed in float, then round half to even and clamp).
DecodedImage resize_bilinear(const DecodedImage& img, int64_t height, int64_t width);

}  // namespace tr::data
