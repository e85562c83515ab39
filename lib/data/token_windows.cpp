#include "data/token_windows.h"
#include "ops/factories.h"

namespace tr::data {

void TokenWindows::set_windows(int64_t block_size, bool overlapping, int64_t count) {
  block_size_ = block_size;
  overlapping_ = overlapping;
  num_windows_ = overlapping ? count - block_size : (count - 1) / block_size;
}

std::string TokenWindows::describe_windows() const {
  return str("block_size=", block_size_, ", ", num_windows_, overlapping_ ? " overlapping" : " non-overlapping", " windows");
}

void TokenWindows::fill(int64_t i, int64_t* x, int64_t* y) const {
  check_index(i);
  const int64_t s = window_start(i);
  read_tokens(s, block_size_, x);
  read_tokens(s + 1, block_size_, y);
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
