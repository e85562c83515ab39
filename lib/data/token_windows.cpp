#include "data/token_windows.h"
#include <algorithm>
#include "ops/factories.h"

namespace tr::data {

int64_t TokenWindows::windows_in(int64_t count) const {
  if (count < block_size_ + 1) return 0;
  return overlapping_ ? count - block_size_ : (count - 1) / block_size_;
}

void TokenWindows::set_windows(int64_t block_size, bool overlapping, const std::vector<int64_t>& segment_tokens) {
  block_size_ = block_size;
  overlapping_ = overlapping;
  first_window_.assign(1, 0);
  first_window_.reserve(segment_tokens.size() + 1);
  for (int64_t n : segment_tokens) first_window_.push_back(first_window_.back() + windows_in(n));
  num_windows_ = first_window_.back();
}

TokenWindows::Place TokenWindows::window_place(int64_t i) const {
  check_index(i);
  // the last segment whose first window is <= i (empty segments share their successor's first
  // window, and upper_bound steps past them)
  const auto it = std::upper_bound(first_window_.begin(), first_window_.end(), i) - 1;
  const int64_t j = i - *it;
  return {int64_t(it - first_window_.begin()), overlapping_ ? j : j * block_size_};
}

std::string TokenWindows::describe_windows() const {
  return str("block_size=", block_size_, ", ", num_windows_, overlapping_ ? " overlapping" : " non-overlapping",
             " windows");
}

void TokenWindows::fill(int64_t i, int64_t* x, int64_t* y) const {
  const Place p = window_place(i);
  const int64_t T = block_size_;
  // y is x shifted by one: read the T + 1 tokens once
  read_tokens(p.segment, p.start, T, x);
  std::copy(x + 1, x + T, y);
  read_tokens(p.segment, p.start + T, 1, y + T - 1);
}

Example TokenWindows::get(int64_t i) const {
  Tensor x = empty({block_size_}, DType::I64), y = empty({block_size_}, DType::I64);
  fill(i, x.data_ptr<int64_t>(), y.data_ptr<int64_t>());
  return {x, y};
}

Example TokenWindows::get_batch(const std::vector<int64_t>& idx) const {
  const int64_t B = int64_t(idx.size()), T = block_size_;
  Tensor x = empty({B, T}, DType::I64), y = empty({B, T}, DType::I64);
  int64_t* px = x.data_ptr<int64_t>();
  int64_t* py = y.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) fill(idx[size_t(b)], px + b * T, py + b * T);
  return {x, y};
}

}  // namespace tr::data
