// Dataset: the map-style dataset of torch.utils.data (size + get by index), with a batched
// get that readers override with a contiguous gather.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "core/tensor.h"
#include "ops/ops.h"

namespace tr::data {

// One sample, or a batch of them (the leading dim is the batch).
struct Example {
  Tensor input;
  Tensor target;
};

// Implementations are immutable after construction: get / get_batch are called concurrently
// from DataLoader worker threads.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;  // len(dataset)
  virtual Example get(int64_t i) const = 0;
  // {input [B, ...], target [B, ...]} for the indices in order (torch's default_collate).
  // The default stacks get(i); readers override it with a gather into one buffer.
  virtual Example get_batch(const std::vector<int64_t>& idx) const {
    TR_CHECK(!idx.empty(), describe(), ": get_batch: expected at least one index");
    std::vector<Tensor> xs, ys;
    xs.reserve(idx.size());
    ys.reserve(idx.size());
    for (int64_t i : idx) {
      Example e = get(i);
      xs.push_back(e.input);
      ys.push_back(e.target);
    }
    return {stack(xs), stack(ys)};
  }
  // One line: what the dataset is and where it came from ("IdxDataset(60000 x [1, 28, 28], ...)").
  virtual std::string describe() const = 0;
  // Where sample i lies in the files, as a JSON object for people reading a checkpoint's state.json
  // (a token window's shard and offset); "" when its index says it all.
  virtual std::string locate(int64_t /*i*/) const { return {}; }

 protected:
  // Throws unless 0 <= i < size().
  void check_index(int64_t i) const {
    TR_CHECK(i >= 0 && i < size(), describe(), ": index ", i, " is out of range for a dataset of size ", size());
  }
};

}  // namespace tr::data
