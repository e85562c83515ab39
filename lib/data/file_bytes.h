// FileBytes: a data file's bytes in memory without a copy (a private read-only-to-the-file mapping,
// or a buffer), kept valid by an owner that tensors made over them hold (tr::from_blob).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tr::data {

struct FileBytes {
  uint8_t* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> owner;  // the mapping or buffer behind `data`
  int64_t mtime_ns = 0;               // a mapped file's modification time (from the descriptor mapped)
};

// The file mapped into memory, its pages read in now (MAP_POPULATE). Private: a write to the bytes
// copies the page and never reaches the file. Throws naming `who`, the path and the reason (no
// such file, a directory, unreadable).
FileBytes map_file(const std::string& path, const char* who);

// A buffer of n bytes, uninitialised (the decoder writes every byte).
FileBytes alloc_bytes(size_t n);

}  // namespace tr::data
