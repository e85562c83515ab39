// A dataset's resident samples (decoded images, a CSV table, generated examples): host memory held
// outside the tensor allocator, as a memory-mapped file is. The allocator's peak is what train lines
// report as mem_peak_mb, so that it counts the step's tensors (the model, gradients, optimizer state,
// activations and the batch) whatever the dataset keeps or maps, as torch's max_memory_allocated
// counts the device and never a DataLoader's dataset.
#pragma once
#include "core/tensor.h"

namespace tr::data {

// An uninitialised contiguous CPU tensor of `shape` and `dtype` whose memory the allocator does not count.
Tensor dataset_storage(const Shape& shape, DType dtype);

}  // namespace tr::data
