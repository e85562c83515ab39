// File checksums for corruption detection: zlib's CRC-32 (the one Python's zlib.crc32 computes),
// streamed over the whole file, written as 8 lowercase hex digits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tr::io {

// Continues a CRC-32 over more bytes; start from 0.
uint32_t crc32_update(uint32_t crc, const void* data, size_t n);
std::string crc32_hex(uint32_t crc);  // "0a1b2c3d", as Python's format(zlib.crc32(b), "08x")

struct FileChecksum {
  uint32_t crc32 = 0;
  uint64_t size = 0;  // bytes read
  std::string hex() const { return crc32_hex(crc32); }
};
// Reads the file once in 1 MiB chunks; throws naming the file if it cannot be read.
FileChecksum checksum_file(const std::string& path);

}  // namespace tr::io
