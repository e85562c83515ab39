#include "core/caching_allocator.h"
#include <algorithm>
#include <cstdint>
#include <tuple>

namespace tr {

// A piece of a segment. The blocks of one segment are a list in address order (prev/next); a
// block is live (in live_), free (in its pool) or freed and awaiting events (in pending_).
struct CachingAllocator::Block {
  size_t size = 0;
  char* ptr = nullptr;
  Stream stream = nullptr;
  bool small = false;
  bool allocated = false;
  int pending_events = 0;
  Block* prev = nullptr;
  Block* next = nullptr;
  std::vector<Stream> stream_uses;  // streams other than `stream` that used it (record_stream)

  bool is_split() const { return prev || next; }
  bool is_free() const { return !allocated && pending_events == 0; }
};

bool CachingAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  return std::make_tuple(uintptr_t(a->stream), a->size, uintptr_t(a->ptr)) <
         std::make_tuple(uintptr_t(b->stream), b->size, uintptr_t(b->ptr));
}

CachingAllocator::CachingAllocator(std::unique_ptr<DeviceMemory> device) : device_(std::move(device)) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> g(mu_);
  try {
    release_cached();
  } catch (...) {  // at exit the runtime may be gone already; the process returns its memory anyway
  }
  // the bookkeeping of segments that still hold live blocks (their memory stays with the device)
  for (Pool* pool : {&small_, &large_})
    for (Block* b : *pool) delete b;
  for (auto& [p, b] : live_) delete b;
  for (auto& [e, b] : pending_)
    if (--b->pending_events == 0) delete b;
}

size_t CachingAllocator::round_size(size_t nbytes) {
  return nbytes < kMinBlock ? kMinBlock : (nbytes + kMinBlock - 1) / kMinBlock * kMinBlock;
}

size_t CachingAllocator::segment_size(size_t rounded) {
  if (rounded <= kSmallRequest) return kSmallSegment;
  if (rounded < kMinLargeAlloc) return kLargeSegment;
  return (rounded + kLargeRound - 1) / kLargeRound * kLargeRound;
}

CachingAllocator::Pool& CachingAllocator::pool_of(const Block& b) { return b.small ? small_ : large_; }

void* CachingAllocator::allocate(size_t nbytes) { return allocate(nbytes, nullptr); }

void* CachingAllocator::allocate(size_t nbytes, Stream stream) {
  const size_t size = round_size(nbytes);
  const bool small = size <= kSmallRequest;
  std::lock_guard<std::mutex> g(mu_);
  if (!pending_.empty()) process_events();
  Block* b = take_free_block(small ? small_ : large_, size, stream);
  if (b) {
    stats_.cache_hits++;
  } else {
    b = new_segment(size, nbytes, small, stream);
  }
  // the rest of a large block is kept only when it can serve a large request of its own
  const size_t rest = b->size - size;
  if (small ? rest >= kMinBlock : rest > kSmallRequest) split(b, size);
  b->allocated = true;
  live_[b->ptr] = b;
  stats_.allocated += int64_t(b->size);
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  stats_.num_allocs++;
  return b->ptr;
}

CachingAllocator::Block* CachingAllocator::take_free_block(Pool& pool, size_t size, Stream stream) {
  Block key;
  key.stream = stream;
  key.size = size;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  pool.erase(it);
  return b;
}

CachingAllocator::Block* CachingAllocator::new_segment(size_t size, size_t requested, bool small, Stream stream) {
  const size_t seg = segment_size(size);
  void* p = device_->alloc(seg);
  if (!p) {
    release_cached();
    p = device_->alloc(seg);
  }
  if (!p) throw out_of_memory_error(device_->describe(), requested, stats_);
  stats_.reserved += int64_t(seg);
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  stats_.segments++;
  Block* b = new Block;
  b->size = seg;
  b->ptr = static_cast<char*>(p);
  b->stream = stream;
  b->small = small;
  return b;
}

// Splits b after its first `size` bytes; the rest goes to the pool as a free block.
void CachingAllocator::split(Block* b, size_t size) {
  Block* rest = new Block;
  rest->size = b->size - size;
  rest->ptr = b->ptr + size;
  rest->stream = b->stream;
  rest->small = b->small;
  rest->prev = b;
  rest->next = b->next;
  if (b->next) b->next->prev = rest;
  b->next = rest;
  b->size = size;
  pool_of(*rest).insert(rest);
}

void CachingAllocator::deallocate(void* p, size_t) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = live_.find(p);
  if (it == live_.end()) return;
  Block* b = it->second;
  live_.erase(it);
  b->allocated = false;
  stats_.allocated -= int64_t(b->size);
  if (b->stream_uses.empty()) {
    free_block(b);
    return;
  }
  for (Stream s : b->stream_uses) {
    pending_.emplace_back(device_->record_event(s), b);
    b->pending_events++;
  }
  b->stream_uses.clear();
}

void CachingAllocator::record_stream(void* p, Stream stream) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = live_.find(p);
  TR_CHECK(it != live_.end(), "record_stream: ", p, " is not the start of a block this allocator holds live");
  Block* b = it->second;
  if (stream == b->stream) return;  // its own stream orders the reuse already
  if (std::find(b->stream_uses.begin(), b->stream_uses.end(), stream) == b->stream_uses.end())
    b->stream_uses.push_back(stream);
}

// Returns b to its pool, merged with its free neighbours.
void CachingAllocator::free_block(Block* b) {
  merge(b, b->prev);
  merge(b, b->next);
  pool_of(*b).insert(b);
}

void CachingAllocator::merge(Block* into, Block* n) {
  if (!n || !n->is_free()) return;
  pool_of(*n).erase(n);  // before any field it is ordered by changes
  if (n == into->prev) {
    into->ptr = n->ptr;
    into->prev = n->prev;
    if (into->prev) into->prev->next = into;
  } else {
    into->next = n->next;
    if (into->next) into->next->prev = into;
  }
  into->size += n->size;
  delete n;
}

void CachingAllocator::process_events() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!device_->event_done(it->first)) {
      ++it;
      continue;
    }
    device_->destroy_event(it->first);
    Block* b = it->second;
    it = pending_.erase(it);
    if (--b->pending_events == 0) free_block(b);
  }
}

void CachingAllocator::release_cached() {
  while (!pending_.empty()) {
    auto [e, b] = pending_.back();
    pending_.pop_back();
    device_->wait_event(e);
    device_->destroy_event(e);
    if (--b->pending_events == 0) free_block(b);
  }
  for (Pool* pool : {&small_, &large_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->is_split()) {
        ++it;
        continue;
      }
      device_->free(b->ptr);
      stats_.reserved -= int64_t(b->size);
      stats_.segments--;
      it = pool->erase(it);
      delete b;
    }
  }
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> g(mu_);
  release_cached();
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  MemoryStats s = stats_;
  for (const Pool* pool : {&small_, &large_})
    for (const Block* b : *pool)
      if (b->is_split()) s.inactive_split += int64_t(b->size);
  return s;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> g(mu_);
  stats_.peak_allocated = stats_.allocated;
  stats_.peak_reserved = stats_.reserved;
}

}  // namespace tr
