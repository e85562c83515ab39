// Little-endian 32-bit words in byte buffers: the file formats (RecordIO, llm.c token files) and
// the store's wire messages.
#pragma once
#include <cstdint>
#include <vector>

namespace tr {

inline uint32_t le32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

inline void put_le32(std::vector<uint8_t>& out, uint32_t v) {
  for (int k = 0; k < 4; ++k) out.push_back(uint8_t(v >> (8 * k)));
}

}  // namespace tr
