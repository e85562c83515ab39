// Host copies of a checkpoint snapshot's tensors for a background write: the originals (the
// parameters, the optimizer's state) are updated in place by the next steps while the copy is
// written. Device tensors are copied into page-locked host memory, as torch's async_save stages
// them. One buffer holds a snapshot's copies and is reused by the next one (at most one write is
// in flight), so a checkpoint allocates nothing once the first has sized it.
#pragma once
#include <cstddef>
#include <memory>
#include "train/checkpoint_snapshot.h"

namespace tr::train {

class CheckpointStaging {
 public:
  // Replaces every tensor of s.files by a contiguous CPU copy (same dtype, shape and bytes). The
  // copies live in this object's buffer while any of them is alive; a buffer whose copies are
  // still held is left to them and a new one is taken.
  void stage(CheckpointSnapshot& s);
  // The bytes the buffer holds (0 before the first stage), and whether it is page-locked.
  size_t capacity() const { return buffer_ ? buffer_->bytes : 0; }
  bool pinned() const { return buffer_ && buffer_->pinned; }

 private:
  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
    bool pinned = false;
    Buffer(size_t n, bool pin);
    ~Buffer();
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
  };
  std::shared_ptr<Buffer> buffer_;
};

}  // namespace tr::train
