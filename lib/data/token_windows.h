// TokenWindows: language-model examples over a token stream, the part TextDataset (bytes of text
// files) and TokenDataset (a token file) share. Example i is (x = tokens[s : s+T],
// y = tokens[s+1 : s+T+1]) with s = i * T (strided windows, size (n - 1) / T: an epoch sees each
// token once) or s = i (overlapping, size n - T: every offset, the random windows nanoGPT draws).
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "data/dataset.h"

namespace tr::data {

class TokenWindows : public Dataset {
 public:
  int64_t size() const override { return num_windows_; }
  Example get(int64_t i) const override;                               // input, target: i64 [T]
  Example get_batch(const std::vector<int64_t>& idx) const override;  // i64 [B, T]
  int64_t block_size() const { return block_size_; }
  bool overlapping() const { return overlapping_; }
  // Start of window i in the token stream.
  int64_t window_start(int64_t i) const { return overlapping_ ? i : i * block_size_; }
  // "block_size=T, N overlapping windows" (or non-overlapping), for describe()
  std::string describe_windows() const;

 protected:
  // The windows over a stream of `count` tokens (the subclass has checked count >= block_size + 1).
  void set_windows(int64_t block_size, bool overlapping, int64_t count);
  // Tokens [start, start + n) of the stream, into out.
  virtual void read_tokens(int64_t start, int64_t n, int64_t* out) const = 0;

 private:
  void fill(int64_t i, int64_t* x, int64_t* y) const;
  int64_t block_size_ = 0;
  bool overlapping_ = false;
  int64_t num_windows_ = 0;
};

}  // namespace tr::data
