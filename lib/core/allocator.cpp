#include "core/allocator.h"
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <new>
#include <vector>
#include "core/error.h"
#include "core/format_bytes.h"

namespace tr {

namespace {

std::function<Allocator&(int)>& factory(DeviceType t) {
  static std::function<Allocator&(int)> f[kNumDeviceTypes];
  return f[int(t)];
}

}  // namespace

ExactSizeCachingAllocator::ExactSizeCachingAllocator(RawAlloc raw_alloc, RawFree raw_free, size_t min_cached_bytes,
                                                     std::function<std::string()> describe)
    : raw_alloc_(std::move(raw_alloc)),
      raw_free_(std::move(raw_free)),
      min_cached_(min_cached_bytes),
      describe_(std::move(describe)) {}

OutOfMemoryError out_of_memory_error(const std::string& where, size_t nbytes, const MemoryStats& s) {
  return OutOfMemoryError(str("out of memory", where.empty() ? std::string() : " on " + where, ": tried to allocate ",
                              format_bytes(double(nbytes)), "; ", format_bytes(double(s.allocated)),
                              " held by tensors, ", format_bytes(double(s.reserved)),
                              " reserved by the caching allocator (its free cache was released and the allocation "
                              "retried), peak ",
                              format_bytes(double(s.peak_allocated))));
}

ExactSizeCachingAllocator::~ExactSizeCachingAllocator() { empty_cache(); }

size_t ExactSizeCachingAllocator::round_size(size_t nbytes) {
  // 512-byte granularity below 1 MiB, 2 MiB granularity above
  if (nbytes == 0) return 512;
  if (nbytes < (1u << 20)) return (nbytes + 511) / 512 * 512;
  return (nbytes + (2u << 20) - 1) / (2u << 20) * (2u << 20);
}

void ExactSizeCachingAllocator::release(void* p, size_t rounded) {
  raw_free_(p);
  stats_.reserved -= int64_t(rounded);
  stats_.segments--;
}

void* ExactSizeCachingAllocator::allocate(size_t nbytes) {
  size_t rs = round_size(nbytes);
  std::lock_guard<std::mutex> g(mu_);
  void* p = nullptr;
  auto it = free_blocks_.find(rs);
  if (it != free_blocks_.end()) {
    p = it->second;
    free_blocks_.erase(it);
    stats_.cache_hits++;
  } else {
    p = raw_alloc_(rs);
    if (!p) {  // free the cache and retry once before giving up
      for (auto& [sz, b] : free_blocks_) release(b, sz);
      free_blocks_.clear();
      p = raw_alloc_(rs);
    }
    if (!p) throw out_of_memory_error(describe_ ? describe_() : std::string(), nbytes, stats_);
    stats_.reserved += int64_t(rs);
    stats_.segments++;
    stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  }
  live_blocks_[p] = rs;
  stats_.allocated += int64_t(rs);
  stats_.num_allocs++;
  if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
  return p;
}

void ExactSizeCachingAllocator::deallocate(void* p, size_t) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = live_blocks_.find(p);
  if (it == live_blocks_.end()) return;
  size_t rs = it->second;
  live_blocks_.erase(it);
  stats_.allocated -= int64_t(rs);
  if (rs < min_cached_) {
    release(p, rs);
    return;
  }
  free_blocks_.emplace(rs, p);
}

MemoryStats ExactSizeCachingAllocator::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

void ExactSizeCachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> g(mu_);
  stats_.peak_allocated = stats_.allocated;
  stats_.peak_reserved = stats_.reserved;
}

void ExactSizeCachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> g(mu_);
  for (auto& [sz, b] : free_blocks_) release(b, sz);
  free_blocks_.clear();
}

void register_allocator(DeviceType t, std::function<Allocator&(int)> get) { factory(t) = std::move(get); }

Allocator& allocator_for(Device d) {
  if (d.is_cpu()) {
    // 64-byte aligned; blocks of 1 MiB and more are cached for reuse
    static ExactSizeCachingAllocator cpu([](size_t n) { return std::aligned_alloc(64, n); },
                                         [](void* p) { std::free(p); }, size_t(1) << 20);
    return cpu;
  }
  auto& f = factory(d.type);
  if (!f) throw Error(str("no allocator for device ", d.str(), ": this build has no CUDA support"));
  return f(d.index);
}

MemoryStats memory_stats(Device d) { return allocator_for(d).stats(); }
void reset_peak_memory_stats(Device d) { allocator_for(d).reset_peak(); }

}  // namespace tr
