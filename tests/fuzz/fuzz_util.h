// Shared by the libFuzzer targets: which failures are the product's answer to bad input, and
// files for the readers that take a path.
#pragma once
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>
#include "core/error.h"

namespace tr::fuzz {

// Runs f. A tr::Error is the product's answer to bad input (one message naming the file, key or
// record) and is expected; any other exception escapes, and libFuzzer reports it as a crash: an
// input that gets past the checks to a std::out_of_range or a JSON library error deserves a
// better message.
template <typename F> void expect_clean_error(F&& f) {
  try {
    f();
  } catch (const tr::Error&) {}
}

// The input split at NUL bytes: [0] the main text, the rest extra strings (e.g. --set overrides).
inline std::vector<std::string> split_nul(const uint8_t* data, size_t size, size_t max_parts) {
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0 && parts.size() < max_parts)
      parts.emplace_back();
    else
      parts.back().push_back(char(data[i]));
  }
  return parts;
}

// A file holding the input, for readers that take a path: one per process and name, rewritten
// each run, removed at exit.
class InputFile {
 public:
  explicit InputFile(const std::string& name) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/trainer-fuzz-" + std::to_string(::getpid()) + "-" + name;
  }
  ~InputFile() { std::remove(path_.c_str()); }
  const std::string& write(const void* data, size_t size) {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f) std::abort();
    if (size && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tr::fuzz
