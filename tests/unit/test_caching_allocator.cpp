// The devices' caching allocator (core/caching_allocator.h) on a fake device: malloc with a byte
// budget, and events that complete when the test finishes a stream's work. The [gpu] cases run
// the CUDA device's allocator through cudaMalloc and cudaEventRecord.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <vector>
#include "core/caching_allocator.h"
#include "core/cuda_hooks.h"
#include "ops/ops.h"
#include "unit/require_gpu.h"

namespace test_caching_allocator {

using namespace tr;

namespace {

constexpr size_t KiB = size_t(1) << 10, MiB = size_t(1) << 20;
using Stream = CachingAllocator::Stream;

Stream stream(int i) { return reinterpret_cast<Stream>(uintptr_t(i)); }

// What the fake device did, read by the test after the allocator took the device.
struct FakeState {
  int64_t limit = -1;  // raw allocations past this many live bytes fail
  int64_t live_bytes = 0;
  int allocs = 0, frees = 0, events_recorded = 0, events_destroyed = 0, waits = 0;
  std::map<void*, size_t> sizes;
  std::map<Stream, int> queued, finished;              // work launched and completed per stream
  std::map<uintptr_t, std::pair<Stream, int>> events;  // id -> stream and the work it marks
  uintptr_t next_event = 1;

  // what a test leaves allocated is returned here, after the allocator
  ~FakeState() {
    for (auto& [p, n] : sizes) std::free(p);
  }
  void launch(Stream s) { queued[s]++; }
  void finish(Stream s) { finished[s] = queued[s]; }
};

class FakeDevice : public DeviceMemory {
 public:
  explicit FakeDevice(FakeState& s) : s_(s) {}
  void* alloc(size_t n) override {
    if (s_.limit >= 0 && s_.live_bytes + int64_t(n) > s_.limit) return nullptr;
    void* p = std::aligned_alloc(512, n);
    s_.allocs++;
    s_.live_bytes += int64_t(n);
    s_.sizes[p] = n;
    return p;
  }
  void free(void* p) override {
    s_.frees++;
    s_.live_bytes -= int64_t(s_.sizes.at(p));
    s_.sizes.erase(p);
    std::free(p);
  }
  Event record_event(Stream st) override {
    s_.events_recorded++;
    const uintptr_t id = s_.next_event++;
    s_.events[id] = {st, s_.queued[st]};
    return reinterpret_cast<Event>(id);
  }
  bool event_done(Event e) override {
    const auto& [st, work] = s_.events.at(reinterpret_cast<uintptr_t>(e));
    return s_.finished[st] >= work;
  }
  void wait_event(Event e) override {
    s_.waits++;
    const auto& [st, work] = s_.events.at(reinterpret_cast<uintptr_t>(e));
    s_.finished[st] = std::max(s_.finished[st], work);
  }
  void destroy_event(Event e) override {
    s_.events_destroyed++;
    s_.events.erase(reinterpret_cast<uintptr_t>(e));
  }
  std::string describe() override { return "fake:0 (the test's budget)"; }

 private:
  FakeState& s_;
};

struct Fixture {
  FakeState dev;  // outlives the allocator
  CachingAllocator a{std::make_unique<FakeDevice>(dev)};
};

char* at(void* p) { return static_cast<char*>(p); }

}  // namespace

TEST_CASE("caching allocator: requests round to 512 B, segments of 2 MiB, 20 MiB or the request's own", "[allocator]") {
  CHECK(CachingAllocator::round_size(0) == 512);
  CHECK(CachingAllocator::round_size(1) == 512);
  CHECK(CachingAllocator::round_size(512) == 512);
  CHECK(CachingAllocator::round_size(513) == 1024);
  CHECK(CachingAllocator::round_size(MiB + 1) == MiB + 512);  // no 2 MiB rounding of large requests
  CHECK(CachingAllocator::segment_size(512) == 2 * MiB);
  CHECK(CachingAllocator::segment_size(MiB) == 2 * MiB);
  CHECK(CachingAllocator::segment_size(MiB + 512) == 20 * MiB);
  CHECK(CachingAllocator::segment_size(10 * MiB - 512) == 20 * MiB);
  CHECK(CachingAllocator::segment_size(10 * MiB) == 10 * MiB);
  CHECK(CachingAllocator::segment_size(11 * MiB + 512) == 12 * MiB);
}

TEST_CASE("caching allocator: small requests are carved from one 2 MiB segment", "[allocator]") {
  Fixture f;
  void* p = f.a.allocate(1000);
  void* q = f.a.allocate(3000);
  void* r = f.a.allocate(100 * KiB);
  CHECK(f.dev.allocs == 1);
  CHECK(at(q) == at(p) + 1024);
  CHECK(at(r) == at(q) + 3072);
  MemoryStats s = f.a.stats();
  CHECK(s.reserved == int64_t(2 * MiB));
  CHECK(s.allocated == int64_t(1024 + 3072 + 100 * KiB));
  CHECK(s.segments == 1);
  CHECK(s.inactive_split == s.reserved - s.allocated);  // the segment's free tail
  CHECK(s.cache_hits == 2);
  for (void* x : {p, q, r}) f.a.deallocate(x, 0);
  s = f.a.stats();
  CHECK(s.allocated == 0);
  CHECK(s.inactive_split == 0);  // merged back into one whole segment
  f.a.empty_cache();
  CHECK(f.dev.frees == 1);
  CHECK(f.a.stats().reserved == 0);
  CHECK(f.a.stats().segments == 0);
}

TEST_CASE("caching allocator: a freed block merges with its free neighbours and serves a larger request",
          "[allocator]") {
  Fixture f;
  void* a = f.a.allocate(2 * MiB);
  void* b = f.a.allocate(3 * MiB);
  void* c = f.a.allocate(4 * MiB);
  REQUIRE(f.dev.allocs == 1);  // one 20 MiB segment
  CHECK(at(b) == at(a) + 2 * MiB);
  CHECK(at(c) == at(b) + 3 * MiB);
  f.a.deallocate(b, 0);
  f.a.deallocate(a, 0);
  MemoryStats s = f.a.stats();
  CHECK(s.allocated == int64_t(4 * MiB));
  CHECK(s.inactive_split == int64_t(16 * MiB));  // [a+b: 5 MiB free][c][11 MiB free]
  void* d = f.a.allocate(5 * MiB);               // fits only in the merged block
  CHECK(d == a);
  CHECK(f.dev.allocs == 1);
  f.a.deallocate(d, 0);
  f.a.deallocate(c, 0);  // merges both sides: the segment is whole again
  CHECK(f.a.stats().inactive_split == 0);
  f.a.empty_cache();
  CHECK(f.dev.frees == 1);
  CHECK(f.dev.live_bytes == 0);
}

TEST_CASE("caching allocator: a large block is split only when more than 1 MiB is left over", "[allocator]") {
  Fixture f;
  void* big = f.a.allocate(12 * MiB);  // a 12 MiB segment of its own
  f.a.deallocate(big, 0);
  void* p = f.a.allocate(11 * MiB + 512);  // 1 MiB - 512 B to spare: the whole block
  CHECK(p == big);
  CHECK(f.a.stats().allocated == int64_t(12 * MiB));
  f.a.deallocate(p, 0);
  void* q = f.a.allocate(10 * MiB);  // 2 MiB to spare: split, the rest stays cached
  CHECK(q == big);
  CHECK(f.a.stats().allocated == int64_t(10 * MiB));
  CHECK(f.a.stats().inactive_split == int64_t(2 * MiB));
  void* r = f.a.allocate(1536 * KiB);  // a large request served by the rest
  CHECK(at(r) == at(big) + 10 * MiB);
  CHECK(f.dev.allocs == 1);
  f.a.deallocate(q, 0);
  f.a.deallocate(r, 0);
}

TEST_CASE("caching allocator: a request takes the smallest free block that fits", "[allocator]") {
  Fixture f;
  // one small segment: [a 4K][x][b 16K][y][c 8K][z][free tail]
  void* a = f.a.allocate(4 * KiB);
  void* x = f.a.allocate(512);
  void* b = f.a.allocate(16 * KiB);
  void* y = f.a.allocate(512);
  void* c = f.a.allocate(8 * KiB);
  void* z = f.a.allocate(512);
  for (void* p : {a, b, c}) f.a.deallocate(p, 0);
  CHECK(f.a.allocate(6 * KiB) == c);
  CHECK(f.a.allocate(12 * KiB) == b);
  CHECK(f.a.allocate(3 * KiB) == a);
  CHECK(at(f.a.allocate(20 * KiB)) == at(z) + 512);  // the tail
  CHECK(f.dev.allocs == 1);
  (void)x;
  (void)y;
}

TEST_CASE("caching allocator: small and large requests never share a pool", "[allocator]") {
  Fixture f;
  void* s = f.a.allocate(512 * KiB);
  f.a.deallocate(s, 0);                // a free 2 MiB small segment
  void* l = f.a.allocate(1536 * KiB);  // large: its own 20 MiB segment
  CHECK(f.dev.allocs == 2);
  CHECK(f.a.stats().reserved == int64_t(22 * MiB));
  f.a.deallocate(l, 0);              // a free 20 MiB large segment
  void* s2 = f.a.allocate(4 * KiB);  // from the small segment, not the large one
  CHECK(s2 == s);
  CHECK(f.dev.allocs == 2);
  CHECK(at(f.a.allocate(MiB)) == at(s2) + 4 * KiB);  // 1 MiB is still small
  CHECK(f.dev.allocs == 2);
  CHECK(f.a.allocate(MiB + 1) == l);
  CHECK(f.dev.allocs == 2);
}

TEST_CASE("caching allocator: a freed block is reused only on the stream it was allocated on", "[allocator]") {
  Fixture f;
  void* p = f.a.allocate(4 * KiB, stream(1));
  f.a.deallocate(p, 0);
  void* q = f.a.allocate(4 * KiB, stream(2));
  CHECK(q != p);
  CHECK(f.dev.allocs == 2);  // a segment per stream
  void* r = f.a.allocate(4 * KiB, stream(1));
  CHECK(r == p);
  void* d = f.a.allocate(4 * KiB);  // the default stream: a third
  CHECK(f.dev.allocs == 3);
  for (void* x : {q, r, d}) f.a.deallocate(x, 0);
  f.a.empty_cache();
  CHECK(f.dev.live_bytes == 0);
}

TEST_CASE("caching allocator: record_stream defers reuse until the other stream's work is done", "[allocator]") {
  Fixture f;
  const Stream side = stream(7);
  void* p = f.a.allocate(4 * KiB);
  f.dev.launch(side);  // the side stream is busy with work that uses p
  f.a.record_stream(p, side);
  f.a.record_stream(p, side);     // once per stream
  f.a.record_stream(p, nullptr);  // its own stream: nothing to wait for
  f.a.deallocate(p, 0);
  CHECK(f.dev.events_recorded == 1);
  CHECK(f.a.stats().allocated == 0);  // no tensor holds it
  void* q = f.a.allocate(4 * KiB);
  CHECK(q != p);  // still in use on the side stream
  f.a.deallocate(q, 0);
  f.dev.finish(side);
  void* r = f.a.allocate(4 * KiB);  // the event has completed: p is free and merged again
  CHECK(r == p);
  CHECK(f.dev.events_destroyed == 1);
  CHECK(f.a.stats().inactive_split == int64_t(2 * MiB - 4 * KiB));
  f.a.deallocate(r, 0);

  SECTION("empty_cache waits for the pending frees and returns their segments") {
    void* s = f.a.allocate(4 * KiB);
    f.dev.launch(side);
    f.a.record_stream(s, side);
    f.a.deallocate(s, 0);
    f.a.empty_cache();
    CHECK(f.dev.waits == 1);
    CHECK(f.dev.events.empty());
    CHECK(f.dev.live_bytes == 0);
    CHECK(f.a.stats().reserved == 0);
  }
  SECTION("a pointer the allocator does not hold live is an error") {
    CHECK_THROWS_WITH(f.a.record_stream(at(p) + 512, side), Catch::Matchers::Contains("record_stream"));
  }
}

TEST_CASE("caching allocator: out of memory returns the whole free segments, retries once, then throws",
          "[allocator]") {
  Fixture f;
  f.dev.limit = int64_t(40 * MiB);
  void* small = f.a.allocate(4 * KiB);
  void* cached = f.a.allocate(12 * MiB);
  f.a.deallocate(cached, 0);           // a whole 12 MiB segment, free
  void* big = f.a.allocate(30 * MiB);  // 2 + 12 + 30 > 40: the free segment goes first
  CHECK(big != nullptr);
  CHECK(f.dev.frees == 1);
  CHECK(f.a.stats().reserved == int64_t(32 * MiB));
  CHECK(f.a.stats().segments == 2);  // the small segment holds a live block: kept
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(f.a.allocate(20 * MiB),
                    Contains("out of memory on fake:0 (the test's budget): tried to allocate 20.00 MiB; "
                             "30.00 MiB held by tensors, 32.00 MiB reserved by the caching allocator"));
  CHECK_THROWS_AS(f.a.allocate(20 * MiB), OutOfMemoryError);
  f.a.deallocate(big, 0);
  f.a.deallocate(small, 0);
  CHECK(f.a.allocate(20 * MiB) != nullptr);  // after returning the 30 MiB segment
}

TEST_CASE("caching allocator: statistics stay consistent through random traffic", "[allocator]") {
  Fixture f;
  std::mt19937 rng(29);
  std::vector<void*> live;
  std::uniform_int_distribution<size_t> pick_size(0, 40);
  int64_t peak_alloc = 0, peak_res = 0;
  for (int i = 0; i < 3000; ++i) {
    if (live.empty() || (live.size() < 64 && rng() % 2)) {
      const size_t k = pick_size(rng);  // mostly small, some large, now and then a huge one
      const size_t n = k < 30   ? size_t(1 + rng() % (64 * KiB))
                       : k < 39 ? size_t(MiB + rng() % (12 * MiB))
                                : size_t(rng() % (40 * MiB));
      live.push_back(f.a.allocate(n, stream(int(rng() % 2))));
    } else {
      const size_t j = rng() % live.size();
      if (rng() % 4 == 0) f.a.record_stream(live[j], stream(5));
      f.a.deallocate(live[j], 0);
      live.erase(live.begin() + std::ptrdiff_t(j));
    }
    if (i % 97 == 0) f.dev.finish(stream(5));
    if (i % 1000 == 999) {
      f.a.reset_peak();
      peak_alloc = peak_res = 0;
    }
    const MemoryStats s = f.a.stats();
    peak_alloc = std::max(peak_alloc, s.allocated);
    peak_res = std::max(peak_res, s.reserved);
    REQUIRE(s.allocated >= 0);
    REQUIRE(s.allocated <= s.reserved);
    REQUIRE(s.inactive_split <= s.reserved - s.allocated);
    REQUIRE(s.reserved == f.dev.live_bytes);
    REQUIRE(s.segments == int64_t(f.dev.sizes.size()));
    REQUIRE(s.peak_allocated >= peak_alloc);
    REQUIRE(s.peak_reserved >= peak_res);
    REQUIRE(s.peak_reserved >= s.reserved);
  }
  for (void* p : live) f.a.deallocate(p, 0);
  f.a.empty_cache();
  CHECK(f.a.stats().allocated == 0);
  CHECK(f.a.stats().reserved == 0);
  CHECK(f.dev.live_bytes == 0);
  CHECK(f.dev.events_recorded == f.dev.events_destroyed);
}

namespace {
// One training step of a small transformer (batch 4, 256 tokens, width 256, 4 heads, 4 layers,
// 5000-token vocabulary, f32) as the allocator sees it: the forward keeps each layer's saved
// activations and drops its temporaries, the backward frees them in reverse while gradients come
// and go, and the optimizer's parameters and state stay live throughout.
void transformer_step(CachingAllocator& a) {
  const size_t B = 4, T = 256, C = 256, H = 4, V = 5000, L = 4, f = 4;
  const size_t btc = B * T * C * f, scores = B * H * T * T * f, stats = B * T * f, logits = B * T * V * f;
  std::vector<std::pair<void*, size_t>> saved;
  auto keep = [&](size_t n) { saved.emplace_back(a.allocate(n), n); };
  keep(btc);  // embeddings
  for (size_t l = 0; l < L; ++l) {
    keep(stats);                     // layer norm mean / rstd
    keep(btc);                       // normalized input
    keep(3 * btc);                   // qkv
    keep(scores);                    // attention probabilities
    void* tmp = a.allocate(scores);  // the scores before softmax
    a.deallocate(tmp, 0);
    keep(btc);  // attention output
    keep(stats);
    keep(4 * btc);  // mlp hidden
    keep(4 * btc);  // gelu
    keep(btc);      // residual
  }
  keep(logits);
  void* loss = a.allocate(4);
  void* dlogits = a.allocate(logits);
  a.deallocate(loss, 0);
  void* grad = a.allocate(btc);
  a.deallocate(dlogits, 0);
  while (!saved.empty()) {
    auto [p, n] = saved.back();
    saved.pop_back();
    void* g = a.allocate(n);  // the gradient of what it saved
    a.deallocate(grad, 0);
    a.deallocate(p, 0);
    grad = g;
  }
  a.deallocate(grad, 0);
}
}  // namespace

TEST_CASE("caching allocator: a training step's activations reach a steady state (no growth after step 2)",
          "[allocator]") {
  Fixture f;
  std::vector<void*> params;  // 4 layers of 12 C^2 weights and the embeddings, with Adam's two states
  for (int copy = 0; copy < 3; ++copy) {
    for (int l = 0; l < 4; ++l)
      for (size_t n : {size_t(3 * 256 * 256 * 4), size_t(256 * 256 * 4), size_t(4 * 256 * 256 * 4),
                       size_t(4 * 256 * 256 * 4), size_t(256 * 4), size_t(3 * 256 * 4), size_t(4 * 256 * 4)})
        params.push_back(f.a.allocate(n));
    params.push_back(f.a.allocate(5000 * 256 * 4));
  }
  std::vector<int64_t> reserved;
  for (int step = 1; step <= 5; ++step) {
    transformer_step(f.a);
    reserved.push_back(f.a.stats().reserved);
  }
  CHECK(reserved[1] == reserved[4]);
  CHECK(reserved[2] == reserved[4]);
  const MemoryStats s = f.a.stats();
  // the cache holds little beyond the step's peak (exact-size reuse would hold every size's peak)
  CHECK(double(s.peak_reserved) <= 1.1 * double(s.peak_allocated));  // 1.03 when written
  for (void* p : params) f.a.deallocate(p, 0);
}

TEST_CASE("exact-size caching allocator: peak reserved and segments are kept too", "[allocator]") {
  int64_t live = 0;
  std::map<void*, size_t> sizes;
  ExactSizeCachingAllocator a(
      [&](size_t n) {
        void* p = std::malloc(n);
        sizes[p] = n;
        live += int64_t(n);
        return p;
      },
      [&](void* p) {
        live -= int64_t(sizes.at(p));
        sizes.erase(p);
        std::free(p);
      },
      size_t(1) << 20);
  void* p = a.allocate(4 * MiB);
  void* q = a.allocate(1000);  // below min_cached_bytes: straight back to the system when freed
  CHECK(a.stats().segments == 2);
  a.deallocate(q, 0);
  CHECK(a.stats().segments == 1);
  a.deallocate(p, 0);
  MemoryStats s = a.stats();
  CHECK(s.segments == 1);  // cached
  CHECK(s.reserved == int64_t(4 * MiB));
  CHECK(s.peak_reserved == int64_t(4 * MiB + 1024));
  CHECK(s.inactive_split == 0);
  a.empty_cache();
  a.reset_peak();
  CHECK(a.stats().peak_reserved == 0);
  CHECK(a.stats().segments == 0);
  CHECK(live == 0);
}

// ---------------------------------------------------------------- on cuda:0, through cudaMalloc

namespace {
Device gpu0() { return Device(DeviceType::CUDA, 0); }
CachingAllocator& cuda_allocator() { return dynamic_cast<CachingAllocator&>(allocator_for(gpu0())); }
// cudaStreamLegacy: the default stream under another handle. Blocks allocated on it have pools of
// their own, so these tests see fresh segments whatever earlier tests left cached.
Stream legacy_stream() { return reinterpret_cast<Stream>(uintptr_t(1)); }
}  // namespace

TEST_CASE("cuda caching allocator: small blocks share a 2 MiB segment, large ones split a 20 MiB one",
          "[gpu][allocator]") {
  TR_REQUIRE_GPU();
  CachingAllocator& a = cuda_allocator();
  const Stream s = legacy_stream();
  const MemoryStats before = a.stats();
  void* p = a.allocate(1000, s);
  void* q = a.allocate(3000, s);
  void* r = a.allocate(100 * KiB, s);
  MemoryStats m = a.stats();
  CHECK(m.segments == before.segments + 1);
  CHECK(m.reserved == before.reserved + int64_t(2 * MiB));
  CHECK(at(q) == at(p) + 1024);
  CHECK(at(r) == at(q) + 3072);
  void* l1 = a.allocate(3 * MiB, s);
  void* l2 = a.allocate(3 * MiB, s);
  m = a.stats();
  CHECK(m.segments == before.segments + 2);
  CHECK(m.reserved == before.reserved + int64_t(22 * MiB));
  CHECK(at(l2) == at(l1) + 3 * MiB);
  CHECK(m.allocated <= m.reserved);
  for (void* x : {p, q, r, l1, l2}) a.deallocate(x, 0);
  a.empty_cache();
  CHECK(a.stats().reserved <= before.reserved);
  CHECK(a.stats().segments <= before.segments);
}

TEST_CASE("cuda caching allocator: record_stream waits on a cudaEvent before the block is reused", "[gpu][allocator]") {
  TR_REQUIRE_GPU();
  CachingAllocator& a = cuda_allocator();
  const Stream s = legacy_stream();
  void* p = a.allocate(64 * KiB, s);
  a.record_stream(p, nullptr);  // used by the default stream's work too
  a.deallocate(p, 0);
  cuda::synchronize(0);  // that work is done: the event completes
  void* q = a.allocate(64 * KiB, s);
  CHECK(q == p);
  a.deallocate(q, 0);
  a.empty_cache();
}

TEST_CASE("cuda caching allocator: tensors in neighbouring blocks of a segment keep their own data",
          "[gpu][allocator]") {
  TR_REQUIRE_GPU();
  const TensorOptions o = TensorOptions().device(gpu0());
  Tensor x = full({1000}, 1.0, o), y = full({1000}, 2.0, o), z = x + y;  // 4000 B each: one small segment
  CHECK(sum(x).item() == 1000);
  CHECK(sum(y).item() == 2000);
  CHECK(sum(z).item() == 3000);
}

TEST_CASE("cuda caching allocator: repeated steps of tensors of many sizes reserve nothing new after the second",
          "[gpu][allocator]") {
  TR_REQUIRE_GPU();
  const TensorOptions o = TensorOptions().device(gpu0());
  std::vector<int64_t> reserved;
  for (int step = 0; step < 5; ++step) {
    std::vector<Tensor> saved;
    for (int64_t n : {1000, 70000, 300000, 1000, 2500000, 300000, 700000, 1000, 3000000})
      saved.push_back(empty({n}, o));
    Tensor tmp = empty({4000000}, o);
    tmp = Tensor();
    while (!saved.empty()) {
      Tensor g = empty({saved.back().numel()}, o);
      saved.pop_back();
    }
    reserved.push_back(memory_stats(gpu0()).reserved);
  }
  CHECK(reserved[1] == reserved[4]);
}

}  // namespace test_caching_allocator
