// Allocators per device type, with current/peak statistics (torch.cuda.memory_allocated,
// max_memory_allocated, memory_reserved, reset_peak_memory_stats), and the CPU's allocator. The
// devices' caching allocator is core/caching_allocator.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include "core/device.h"
#include "core/format_bytes.h"  // the allocator's figures, in its messages and trainer info
#include "core/error.h"

namespace tr {

// reserved - allocated is what the cache holds: free blocks ready for reuse, of which
// inactive_split are the pieces of partly used segments (fragmentation: they cannot be returned
// to the device).
struct MemoryStats {
  int64_t allocated = 0;       // bytes held by live tensors (as rounded by the allocator)
  int64_t peak_allocated = 0;  // high-water mark of `allocated` since the last reset
  int64_t reserved = 0;        // bytes obtained from the device (includes the cache)
  int64_t peak_reserved = 0;   // high-water mark of `reserved` since the last reset
  int64_t segments = 0;        // raw allocations held (cudaMalloc calls not yet freed)
  int64_t inactive_split = 0;  // free bytes in segments that also hold live blocks
  int64_t num_allocs = 0;      // allocations served
  int64_t cache_hits = 0;      // allocations served from the cache
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* p, size_t nbytes) = 0;
  virtual MemoryStats stats() const = 0;
  virtual void reset_peak() = 0;
  virtual void empty_cache() {}
};

// The CPU's allocator: freed blocks are kept and reused for requests of the same rounded size
// (no splitting), so a training step after the first takes no fresh pages from the system, and
// empty_cache() can return every cached block (the Trainer does at each switch between training
// and evaluation). Generic over the raw functions so the tests count them.
class ExactSizeCachingAllocator : public Allocator {
 public:
  using RawAlloc = std::function<void*(size_t)>;
  using RawFree = std::function<void(void*)>;
  // Blocks smaller than min_cached_bytes go straight back to raw_free (the CPU keeps only
  // large blocks, whose fresh pages would otherwise fault on every first touch).
  // `describe` names the device and its state for the out-of-memory error ("cuda:0: 1.2 GiB free
  // of 79.1 GiB").
  ExactSizeCachingAllocator(RawAlloc raw_alloc, RawFree raw_free, size_t min_cached_bytes = 0,
                            std::function<std::string()> describe = nullptr);
  ~ExactSizeCachingAllocator() override;
  void* allocate(size_t nbytes) override;
  void deallocate(void* p, size_t nbytes) override;
  MemoryStats stats() const override;
  void reset_peak() override;
  void empty_cache() override;
  static size_t round_size(size_t nbytes);

 private:
  RawAlloc raw_alloc_;
  RawFree raw_free_;
  size_t min_cached_;
  std::function<std::string()> describe_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_blocks_;       // rounded size -> block
  std::unordered_map<void*, size_t> live_blocks_;  // block -> rounded size
  MemoryStats stats_;

  void release(void* p, size_t rounded);
};

// The error of a caching allocator that the device refused even after its cache was released:
// `where` names the device and its state ("cuda:0 (1.20 GiB free of 79.19 GiB)", may be empty).
OutOfMemoryError out_of_memory_error(const std::string& where, size_t nbytes, const MemoryStats& s);

// Returns the allocator for a device (CPU: 64-byte aligned malloc with statistics).
Allocator& allocator_for(Device d);
// Backends register their allocator factory at static-initialisation time.
void register_allocator(DeviceType t, std::function<Allocator&(int index)> get);

MemoryStats memory_stats(Device d);
void reset_peak_memory_stats(Device d);
// torch.cuda.memory_allocated / max_memory_allocated / reset_max_memory_allocated, for any device.
inline int64_t memory_allocated(Device d) { return memory_stats(d).allocated; }
inline int64_t max_memory_allocated(Device d) { return memory_stats(d).peak_allocated; }
inline void reset_max_memory_allocated(Device d) { reset_peak_memory_stats(d); }

}  // namespace tr
