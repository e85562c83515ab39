// gunzip of a whole file in memory: libdeflate (about 3x zlib's speed here) for intact files;
// zlib's streaming reader for the files libdeflate refuses, to recover what decodes before the
// damage and say why the rest did not.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include "data/file_bytes.h"

namespace tr::data {

// gzip's magic bytes 1f 8b at the start.
bool is_gzip(const uint8_t* p, size_t n);

struct Gunzipped {
  FileBytes bytes;    // the decompressed data (all of it, or what decoded before the damage)
  std::string error;  // empty when the file decoded whole; else the decoder's reason ("unexpected end of file")
};

// Deflate's largest expansion: 1032 output bytes per input byte.
inline constexpr uint64_t kMaxDeflateRatio = 1032;
// The length the gzip trailer states: the decompressed size of a file of one member under 4 GiB
// (of the last member mod 2^32 otherwise); 0 (unknown) when the file is too short for a trailer or
// the claim exceeds what its bytes could expand to.
size_t gzip_stated_size(const FileBytes& in);

// Decompresses `in` into out[0, n) when it is one intact gzip member of exactly n bytes; false
// otherwise (several members, another size, damage): gunzip() then handles the file.
bool gunzip_exact(const FileBytes& in, uint8_t* out, size_t n);

// The decompressed content of the gzip data `in` (the bytes of the file at `path`; members
// concatenated as gzip -d reads them, trailing non-gzip bytes ignored as gzip -d does).
Gunzipped gunzip(const FileBytes& in, const std::string& path);

}  // namespace tr::data
