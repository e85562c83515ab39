// The integration tests' reader of the safetensors files the binary writes, straight from the
// format (8-byte little-endian header length, JSON header, data), independent of lib/io.
#pragma once
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include "integration/cli_harness.h"

namespace it {

struct StoredTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

inline nlohmann::json safetensors_header(const std::string& file_bytes) {
  REQUIRE(file_bytes.size() >= 8);
  uint64_t n = 0;
  std::memcpy(&n, file_bytes.data(), 8);
  REQUIRE(8 + n <= file_bytes.size());
  return nlohmann::json::parse(file_bytes.substr(8, n));
}

// A safetensors file's tensors by name.
inline std::map<std::string, StoredTensor> read_safetensors(const fs::path& p) {
  const std::string f = read(p);
  const nlohmann::json header = safetensors_header(f);
  uint64_t n = 0;
  std::memcpy(&n, f.data(), 8);
  const size_t data = 8 + n;
  std::map<std::string, StoredTensor> out;
  for (auto& [name, v] : header.items()) {
    if (name == "__metadata__") continue;
    const uint64_t begin = v["data_offsets"][0], end = v["data_offsets"][1];
    out[name] = {v["dtype"], v["shape"].get<std::vector<int64_t>>(), f.substr(data + begin, end - begin)};
  }
  return out;
}

inline nlohmann::json metadata_of(const fs::path& p) {
  return safetensors_header(read(p)).value("__metadata__", nlohmann::json::object());
}

}  // namespace it
