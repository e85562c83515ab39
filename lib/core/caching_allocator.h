// The devices' caching allocator, after the design of torch's CUDA caching allocator
// (c10/cuda/CUDACachingAllocator.cpp). Generic over the device (DeviceMemory), so the CPU tests
// drive it with malloc and events they complete by hand; CUDA's backend is core/cuda/device_memory.
//
// - A request rounds up to 512 B. Requests of at most 1 MiB are carved from 2 MiB segments (the
//   small pool); larger ones from segments of 20 MiB when under 10 MiB, else of their own size
//   rounded up to 2 MiB (the large pool). Activations of many sizes then share segments instead of
//   each size holding blocks of its own.
// - A request takes the smallest free block of its pool and stream that fits. A block with more to
//   spare than 512 B (small pool) or 1 MiB (large pool) is split and the rest stays free; a freed
//   block merges with the free blocks beside it in its segment.
// - A block belongs to the stream it was allocated on and is reused only there (work on one stream
//   runs in order, so the next user cannot overtake the last). A block also used on other streams
//   (record_stream) is reused once events recorded on them at its free have completed.
// - When the device refuses a segment: wait for those events, return every free segment that is
//   whole (not split) and retry once; then OutOfMemoryError with the device's state.
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>
#include "core/allocator.h"

namespace tr {

// What the caching allocator needs from one device: raw memory and events on its streams.
class DeviceMemory {
 public:
  using Stream = void*;  // the device's stream handle (a cudaStream_t); nullptr: the default stream
  using Event = void*;
  virtual ~DeviceMemory() = default;
  virtual void* alloc(size_t nbytes) = 0;  // nullptr when the device has no room
  virtual void free(void* p) = 0;
  virtual Event record_event(Stream s) = 0;  // completes once the work queued on s so far is done
  virtual bool event_done(Event e) = 0;
  virtual void wait_event(Event e) = 0;
  virtual void destroy_event(Event e) = 0;
  // The device and its state for the out-of-memory error: "cuda:0 (1.20 GiB free of 79.19 GiB)".
  virtual std::string describe() = 0;
};

class CachingAllocator : public Allocator {
 public:
  using Stream = DeviceMemory::Stream;
  static constexpr size_t kMinBlock = 512;                  // the rounding of every request
  static constexpr size_t kSmallRequest = size_t(1) << 20;  // at most this: the small pool
  static constexpr size_t kSmallSegment = size_t(2) << 20;
  static constexpr size_t kLargeSegment = size_t(20) << 20;
  static constexpr size_t kMinLargeAlloc = size_t(10) << 20;  // from this size a segment is the request's own
  static constexpr size_t kLargeRound = size_t(2) << 20;

  explicit CachingAllocator(std::unique_ptr<DeviceMemory> device);
  // Returns the free segments; segments that still hold live blocks are left to the device.
  ~CachingAllocator() override;
  void* allocate(size_t nbytes) override;  // on the default stream
  void* allocate(size_t nbytes, Stream stream);
  void deallocate(void* p, size_t nbytes) override;
  // torch's Tensor.record_stream: the block at p (as allocate returned it) is also used by work
  // queued on `stream`, so its free waits for that work before the block is reused.
  void record_stream(void* p, Stream stream);
  MemoryStats stats() const override;
  void reset_peak() override;
  // Waits for the blocks whose free awaits other streams, then returns every whole free segment.
  void empty_cache() override;

  static size_t round_size(size_t nbytes);
  // The segment allocated from the device for a rounded request that no free block serves.
  static size_t segment_size(size_t rounded);

 private:
  struct Block;
  struct BlockOrder {  // by stream, then size, then address: best fit is a lower_bound
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockOrder>;

  std::unique_ptr<DeviceMemory> device_;
  mutable std::mutex mu_;
  Pool small_, large_;                                           // free blocks
  std::unordered_map<void*, Block*> live_;                       // allocated blocks by address
  std::vector<std::pair<DeviceMemory::Event, Block*>> pending_;  // freed blocks awaiting other streams
  MemoryStats stats_;

  Pool& pool_of(const Block& b);
  Block* take_free_block(Pool& pool, size_t size, Stream stream);
  Block* new_segment(size_t size, size_t requested, bool small, Stream stream);
  void split(Block* b, size_t size);
  void free_block(Block* b);
  void merge(Block* into, Block* neighbour);
  void process_events();
  void release_cached();
};

}  // namespace tr
