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

// How map_file brings the pages in: all of them now (MAP_POPULATE: a file read whole, soon), or
// each when it is first touched and only it (MADV_RANDOM: a token shard of which a run reads
// windows here and there; opening 100 shards of 200 MB must not read 20 GB, and a shuffled
// window's 2 KB must not pull in the kernel's read-around of up to MBs).
enum class MapPages { populate, on_demand };

// The file mapped into memory. Private: a write to the bytes copies the page and never reaches the
// file. Throws naming `who`, the path and the reason (no such file, a directory, unreadable).
FileBytes map_file(const std::string& path, const char* who, MapPages pages = MapPages::populate);

// A buffer of n bytes, uninitialised (the decoder writes every byte).
FileBytes alloc_bytes(size_t n);

}  // namespace tr::data
