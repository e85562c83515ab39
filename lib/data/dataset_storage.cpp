#include "data/dataset_storage.h"
#include <algorithm>
#include <cstdlib>
#include <new>
#include "core/error.h"

namespace tr::data {

Tensor dataset_storage(const Shape& shape, DType dtype) {
  const size_t bytes = size_t(numel_of(shape)) * itemsize(dtype);
  // 64-byte aligned, as the allocator's blocks are, for the vectorised copies into batches
  void* p = std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64);
  TR_CHECK(p, "dataset: cannot allocate ", bytes, " bytes of host memory for the samples of shape ", shape);
  std::shared_ptr<const void> owner(p, [](const void* q) { std::free(const_cast<void*>(q)); });
  return from_blob(p, shape, dtype, std::move(owner));
}

}  // namespace tr::data
