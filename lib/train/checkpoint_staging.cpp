#include "train/checkpoint_staging.h"
#include "core/format_bytes.h"
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include "core/allocator.h"
#include "core/cuda_hooks.h"
#include "core/error.h"
#include "core/tensor.h"

namespace tr::train {

namespace {

constexpr size_t kAlign = 64;  // each copy starts on a cache line, as the CPU allocator's blocks do
size_t padded(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
size_t nbytes(const Tensor& t) { return size_t(t.numel()) * t.element_size(); }

}  // namespace

CheckpointStaging::Buffer::Buffer(size_t n, bool pin) : bytes(n), pinned(pin) {
  data = pin ? cuda::alloc_pinned(n) : std::aligned_alloc(kAlign, padded(std::max<size_t>(n, 1)));
  TR_CHECK(data, "checkpoint staging: cannot allocate ", format_bytes(double(n)),
           " of host memory for the copy of the state");
}

CheckpointStaging::Buffer::~Buffer() {
  if (pinned) {
    try {
      cuda::free_pinned(data);
    } catch (const std::exception&) {  // a destructor must not throw; the process is likely ending
    }
  } else {
    std::free(data);
  }
}

void CheckpointStaging::stage(CheckpointSnapshot& s) {
  size_t need = 0;
  bool on_device = false;
  for (const CheckpointFile& f : s.files)
    for (const auto& [name, t] : f.tensors) {
      if (!t.defined()) continue;  // save_safetensors names it
      need += padded(nbytes(t));
      on_device = on_device || !t.device().is_cpu();
    }
  if (!buffer_ || buffer_.use_count() > 1 || buffer_->bytes < need || (on_device && !buffer_->pinned)) {
    buffer_.reset();  // first, so that the old buffer's memory can serve the new one
    buffer_ = std::make_shared<Buffer>(need, on_device);
  }
  // the copies keep the whole buffer alive (the aliasing constructor: one count for all of them)
  const std::shared_ptr<const void> owner(buffer_, buffer_->data);
  char* p = static_cast<char*>(buffer_->data);
  for (CheckpointFile& f : s.files)
    for (auto& [name, t] : f.tensors) {
      if (!t.defined()) continue;
      const Tensor c = t.detach().contiguous();
      const size_t n = nbytes(c);
      if (n > 0 && c.device().is_cpu())
        std::memcpy(p, c.raw_data(), n);
      else if (n > 0)
        cuda::memcpy(p, kCPU, c.raw_data(), c.device(), n);  // waits for the step that wrote it
      t = from_blob(p, c.sizes(), c.dtype(), owner);
      p += padded(n);
    }
}

}  // namespace tr::train
