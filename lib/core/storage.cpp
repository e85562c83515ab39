#include "core/storage.h"

namespace tr {

StorageImpl::StorageImpl(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = allocator_for(device).allocate(nbytes);
}

StorageImpl::StorageImpl(void* data, size_t nbytes, Device device, bool owned)
    : data_(data), nbytes_(nbytes), device_(device), owned_(owned) {}

StorageImpl::StorageImpl(void* data, size_t nbytes, Device device, std::shared_ptr<const void> keep_alive)
    : data_(data), nbytes_(nbytes), device_(device), owned_(false), keep_alive_(std::move(keep_alive)) {}

StorageImpl::~StorageImpl() {
  if (owned_ && data_) allocator_for(device_).deallocate(data_, nbytes_);
}

}  // namespace tr
