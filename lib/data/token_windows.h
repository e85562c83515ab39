// TokenWindows: language-model examples over token streams, the part TextDataset (bytes of text
// files) and TokenDataset (token files, one or many shards) share. The tokens come in segments (a
// shard each; TextDataset has one) and a window never crosses a segment's end. Within a segment of
// n tokens, window j is (x = tokens[s : s+T], y = tokens[s+1 : s+T+1]) with s = j * T (strided
// windows, (n - 1) / T of them: an epoch sees each token once) or s = j (overlapping, n - T: every
// offset, the random windows nanoGPT draws); a segment of fewer than T + 1 tokens has none. The
// dataset's windows are the segments' in order: index i -> (segment, j) through prefix sums.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "data/dataset.h"

namespace tr::data {

class TokenWindows : public Dataset {
 public:
  int64_t size() const override { return num_windows_; }
  Example get(int64_t i) const override;                              // input, target: i64 [T]
  Example get_batch(const std::vector<int64_t>& idx) const override;  // i64 [B, T]
  int64_t block_size() const { return block_size_; }
  bool overlapping() const { return overlapping_; }

  // Where window i starts: its segment and the offset of its first token in that segment.
  struct Place {
    int64_t segment = 0;
    int64_t start = 0;
  };
  Place window_place(int64_t i) const;
  // Windows a segment of `count` tokens gives (0 below block_size + 1 tokens).
  int64_t windows_in(int64_t count) const;
  // "block_size=T, N overlapping windows" (or non-overlapping), for describe()
  std::string describe_windows() const;

 protected:
  // The windows over segments of these token counts (the subclass has checked that some segment
  // holds block_size + 1 tokens).
  void set_windows(int64_t block_size, bool overlapping, const std::vector<int64_t>& segment_tokens);
  // Tokens [start, start + n) of segment `segment`, into out.
  virtual void read_tokens(int64_t segment, int64_t start, int64_t n, int64_t* out) const = 0;

 private:
  void fill(int64_t i, int64_t* x, int64_t* y) const;
  int64_t block_size_ = 0;
  bool overlapping_ = false;
  int64_t num_windows_ = 0;
  // first_window_[k]: the index of segment k's first window; first_window_.back() == num_windows_
  std::vector<int64_t> first_window_;
};

}  // namespace tr::data
