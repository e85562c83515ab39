#include "data/gunzip.h"
#include <libdeflate.h>
#include <zlib.h>
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>
#include "core/error.h"

namespace tr::data {

bool is_gzip(const uint8_t* p, size_t n) { return n >= 2 && p[0] == 0x1f && p[1] == 0x8b; }

namespace {

// zlib's gzread over the file: everything that decodes, and zlib's message where it stopped (none
// when zlib reads the file whole: what zlib accepts, the reader accepts, only slower).
Gunzipped salvage(const std::string& path) {
  Gunzipped g;
  gzFile f = gzopen(path.c_str(), "rb");
  TR_CHECK(f != nullptr, "gunzip: cannot open '", path, "'");
  std::vector<uint8_t> out;
  uint8_t chunk[1 << 16];
  int r;
  while ((r = gzread(f, chunk, sizeof chunk)) > 0) out.insert(out.end(), chunk, chunk + r);
  int errnum = Z_OK;
  const char* msg = gzerror(f, &errnum);
  if (errnum != Z_OK) g.error = msg && *msg ? msg : "zlib error";
  gzclose(f);
  g.bytes = alloc_bytes(out.size());
  if (!out.empty()) std::memcpy(g.bytes.data, out.data(), out.size());
  return g;
}

struct Decompressor {
  libdeflate_decompressor* d = libdeflate_alloc_decompressor();
  ~Decompressor() { libdeflate_free_decompressor(d); }
};

}  // namespace

size_t gzip_stated_size(const FileBytes& in) {
  if (in.size < 18) return 0;  // shorter than gzip's header and trailer
  uint32_t isize;
  std::memcpy(&isize, in.data + in.size - 4, 4);  // little-endian, as x86
  // Deflate expands at most 1032:1: a larger claim is a damaged (or forged) trailer, and trusting
  // it would allocate up to 4 GiB for a 20-byte file.
  if (uint64_t(isize) > uint64_t(in.size) * kMaxDeflateRatio) return 0;
  return isize;
}

bool gunzip_exact(const FileBytes& in, uint8_t* out, size_t n) {
  Decompressor dec;
  size_t in_used = 0, out_used = 0;
  return dec.d &&
         libdeflate_gzip_decompress_ex(dec.d, in.data, in.size, out, n, &in_used, &out_used) == LIBDEFLATE_SUCCESS &&
         in_used == in.size && out_used == n;
}

Gunzipped gunzip(const FileBytes& in, const std::string& path) {
  Decompressor dec;
  TR_CHECK(dec.d != nullptr, "gunzip '", path, "': out of memory for the decompressor");
  // The trailer's length is exact for one member, a first guess otherwise (the buffer doubles
  // when it is short).
  size_t cap = std::max<size_t>(gzip_stated_size(in), 1 << 16);
  FileBytes out = alloc_bytes(cap);
  size_t in_pos = 0, out_len = 0;
  while (in_pos < in.size) {
    if (in_pos > 0 && !is_gzip(in.data + in_pos, in.size - in_pos)) break;  // trailing bytes: ignored, as gzip -d
    size_t in_used = 0, out_used = 0;
    const libdeflate_result r = libdeflate_gzip_decompress_ex(dec.d, in.data + in_pos, in.size - in_pos,
                                                              out.data + out_len, cap - out_len, &in_used, &out_used);
    if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
      cap *= 2;
      FileBytes bigger = alloc_bytes(cap);
      std::memcpy(bigger.data, out.data, out_len);
      out = std::move(bigger);
      continue;
    }
    if (r != LIBDEFLATE_SUCCESS) return salvage(path);
    in_pos += in_used;
    out_len += out_used;
  }
  out.size = out_len;
  return {out, ""};
}

}  // namespace tr::data
