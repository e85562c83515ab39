// Storage: a device buffer shared by a tensor and all its views, with the version counter
// that autograd uses to detect in-place modification of saved tensors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include "core/allocator.h"
#include "core/device.h"

namespace tr {

class StorageImpl {
 public:
  StorageImpl(size_t nbytes, Device device);
  // Wraps memory owned elsewhere (no free on destruction).
  StorageImpl(void* data, size_t nbytes, Device device, bool owned);
  // Wraps memory that `keep_alive` owns (a file mapping, a buffer): it lives as long as the storage.
  StorageImpl(void* data, size_t nbytes, Device device, std::shared_ptr<const void> keep_alive);
  ~StorageImpl();
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  bool owned_ = true;
  std::shared_ptr<const void> keep_alive_;
  uint64_t version_ = 0;
};

using Storage = std::shared_ptr<StorageImpl>;

}  // namespace tr
