// Kernel launches in the emulator: a launch runs, in its stream's turn, as a loop over the grid's
// blocks and each block's threads. The first block of a kernel's first launch runs its threads as
// fibers (Boost.Context), so that __syncthreads() (all live threads of the block) and warp shuffles (all
// live lanes of the warp) suspend a thread until the others arrive, as on a GPU. A kernel that met
// no barrier there runs its threads as plain calls, one after the other, from then on (and stops
// the process with a message should it meet one later); the others always run as fibers.
#include <sys/mman.h>
#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <thread>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include "runtime_internal.h"

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

namespace cuda_emu {

namespace {

namespace ctx = boost::context;

constexpr size_t kStack = 128 * 1024;

enum class FiberState { Ready, AtBlockBarrier, AtWarpBarrier, Done };

struct Fiber {
  ctx::fiber self;  // the suspended thread, resumed by the scheduler
  ctx::fiber sink;  // the scheduler, resumed by the thread when it waits or ends
  unsigned char* stack = nullptr;
  FiberState state = FiberState::Ready;
  uint3 idx{};
};

// The block being run on this host thread (null outside a fiber block).
struct BlockRun {
  Launch* launch = nullptr;
  std::vector<Fiber>* fibers = nullptr;
  int current = -1;
  bool barrier_seen = false;
  std::vector<uint64_t> slots, published;  // warp exchange: 32 per warp
  std::exception_ptr error;
};
thread_local BlockRun* running = nullptr;
thread_local bool in_direct_kernel = false;

// Stacks mapped once and reused across blocks and launches (up to the largest block seen).
std::vector<unsigned char*>& stack_pool(size_t n) {
  thread_local std::vector<unsigned char*> pool;
  while (pool.size() < n) {
    void* p = mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fatal("cannot map fiber stacks");
    pool.push_back(static_cast<unsigned char*>(p));
  }
  return pool;
}

// Boost.Context's stack allocator interface over one pooled stack.
struct PooledStack {
  unsigned char* base;
  ctx::stack_context allocate() {
    ctx::stack_context sc;
    sc.size = kStack;
    sc.sp = base + kStack;  // stacks grow down
    return sc;
  }
  void deallocate(ctx::stack_context&) noexcept {}
};

unsigned threads_of(const dim3& b) { return b.x * b.y * b.z; }

uint3 thread_index(unsigned t, const dim3& b) { return {t % b.x, (t / b.x) % b.y, t / (b.x * b.y)}; }

// Suspends the running fiber until the scheduler resumes it.
void suspend(Fiber& f) {
  f.sink = std::move(f.sink).resume();
  threadIdx = f.idx;
}

// Runs one block's n threads as fibers until all are done; returns whether any met a barrier.
bool run_block_fibers(Launch* l, unsigned n) {
  std::vector<unsigned char*>& stacks = stack_pool(n);
  std::vector<Fiber> fibers(n);
  BlockRun r;
  r.launch = l;
  r.fibers = &fibers;
  r.slots.assign((n + 31) / 32 * 32, 0);
  r.published = r.slots;
  BlockRun* outer = running;
  running = &r;
  for (unsigned t = 0; t < n; ++t) {
    Fiber& f = fibers[t];
    f.idx = thread_index(t, l->block);
    f.stack = stacks[t];
    f.self = ctx::fiber(std::allocator_arg, PooledStack{f.stack}, [&r, &f](ctx::fiber&& sink) {
      f.sink = std::move(sink);
      try {
        r.launch->run_thread();
      } catch (...) {
        if (!r.error) r.error = std::current_exception();
      }
      f.state = FiberState::Done;
      return std::move(f.sink);
    });
  }
  unsigned live = n;
  while (live > 0) {
    for (unsigned t = 0; t < n; ++t) {
      if (fibers[t].state != FiberState::Ready) continue;
      r.current = int(t);
      threadIdx = fibers[t].idx;
      fibers[t].self = std::move(fibers[t].self).resume();
    }
    live = 0;
    unsigned at_block = 0;
    for (auto& f : fibers) {
      if (f.state == FiberState::Done) continue;
      ++live;
      at_block += f.state == FiberState::AtBlockBarrier;
    }
    if (live == 0) break;
    bool released = false;
    // warps whose live lanes all wait at the exchange: publish their values, release them
    for (unsigned w = 0; w * 32 < n; ++w) {
      unsigned waiting = 0, alive = 0;
      for (unsigned t = w * 32; t < std::min(n, w * 32 + 32); ++t) {
        if (fibers[t].state == FiberState::Done) continue;
        ++alive;
        waiting += fibers[t].state == FiberState::AtWarpBarrier;
      }
      if (alive == 0 || waiting != alive) continue;
      for (unsigned t = w * 32; t < std::min(n, w * 32 + 32); ++t) {
        r.published[t] = r.slots[t];
        if (fibers[t].state == FiberState::AtWarpBarrier) fibers[t].state = FiberState::Ready;
      }
      released = true;
    }
    if (!released && at_block == live) {
      for (auto& f : fibers)
        if (f.state == FiberState::AtBlockBarrier) f.state = FiberState::Ready;
      released = true;
    }
    if (!released) {
      running = outer;
      fatal(
          "a block of the kernel is deadlocked: some of its threads wait at __syncthreads() and others at a "
          "warp shuffle (barrier divergence)");
    }
  }
  running = outer;
  if (r.error) std::rethrow_exception(r.error);
  return r.barrier_seen;
}

// Whether each kernel met a barrier in its first block (then it always runs as fibers). Read
// and written by the thread that runs launches (the one holding the executor lock).
std::map<const void*, bool>& barrier_kernels() {
  static std::map<const void*, bool> m;
  return m;
}

// Runs block `b` (linear over the grid) of the launch on this host thread.
void run_block(Launch* l, unsigned b, bool fibers) {
  const unsigned n = threads_of(l->block);
  gridDim = l->grid;
  blockDim = l->block;
  blockIdx = {b % l->grid.x, (b / l->grid.x) % l->grid.y, b / (l->grid.x * l->grid.y)};
  if (fibers) {
    run_block_fibers(l, n);
    return;
  }
  struct Direct {
    Direct() { in_direct_kernel = true; }
    ~Direct() { in_direct_kernel = false; }
  } direct;
  for (unsigned t = 0; t < n; ++t) {
    threadIdx = thread_index(t, l->block);
    l->run_thread();
  }
}

// Host threads that run a launch's blocks beside the caller (blocks are independent on a GPU).
class BlockPool {
 public:
  BlockPool() {
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned i = 1; i < std::min(hw, 8u); ++i) workers_.emplace_back([this] { work(); });
  }
  ~BlockPool() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  // Runs blocks [first, count) of l over the pool and the caller; rethrows a block's exception.
  void run(Launch* l, unsigned first, unsigned count, bool fibers) {
    {
      std::lock_guard<std::mutex> g(mu_);
      job_ = {l, fibers, count};
      next_ = first;
      active_ = unsigned(workers_.size());
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    drain();
    std::unique_lock<std::mutex> g(mu_);
    done_cv_.wait(g, [this] { return active_ == 0; });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  struct Job {
    Launch* launch = nullptr;
    bool fibers = false;
    unsigned count = 0;
  };
  void drain() {
    while (true) {
      const unsigned b = next_.fetch_add(1);
      if (b >= job_.count) return;
      try {
        run_block(job_.launch, b, job_.fibers);
      } catch (...) {
        std::lock_guard<std::mutex> g(mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }
  void work() {
    uint64_t seen = 0;
    while (true) {
      {
        std::unique_lock<std::mutex> g(mu_);
        cv_.wait(g, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      drain();
      std::lock_guard<std::mutex> g(mu_);
      if (--active_ == 0) done_cv_.notify_all();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  Job job_;
  std::atomic<unsigned> next_{0};
  unsigned active_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

void run_launch(Launch* l) {
  const unsigned blocks = l->grid.x * l->grid.y * l->grid.z;
  // a kernel's first block tells whether it meets barriers (our kernels do in every block or none)
  auto& known = barrier_kernels();
  auto it = known.find(l->kernel);
  unsigned first = 0;
  if (it == known.end()) {
    gridDim = l->grid;
    blockDim = l->block;
    blockIdx = {0, 0, 0};
    const bool met = run_block_fibers(l, threads_of(l->block));
    it = known.emplace(l->kernel, met).first;
    first = 1;
  }
  const bool fibers = it->second;
  if (blocks - first >= 2 && uint64_t(blocks) * threads_of(l->block) >= 8192) {
    static BlockPool* pool = new BlockPool;  // leaked: its threads must outlive static destructors' launches
    pool->run(l, first, blocks, fibers);
    return;
  }
  for (unsigned b = first; b < blocks; ++b) run_block(l, b, fibers);
}

void need_fiber(const char* what) {
  if (running) return;
  if (in_direct_kernel)
    fatal(std::string("a kernel met ") + what +
          " although its first block met none; the emulator runs such "
          "kernels without fibers (make every block of a kernel reach its barriers)");
  fatal(std::string(what) + " called outside a kernel");
}

}  // namespace

void block_barrier() {
  need_fiber("__syncthreads()");
  BlockRun* r = running;
  r->barrier_seen = true;
  Fiber& f = (*r->fibers)[size_t(r->current)];
  f.state = FiberState::AtBlockBarrier;
  suspend(f);
}

int lane_id() {
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  return int(t % 32);
}

uint64_t warp_exchange(uint64_t bits, int src) {
  need_fiber("a warp shuffle");
  BlockRun* r = running;
  r->barrier_seen = true;
  const int me = r->current;
  r->slots[size_t(me)] = bits;
  Fiber& f = (*r->fibers)[size_t(me)];
  f.state = FiberState::AtWarpBarrier;
  suspend(f);
  const int warp_base = me / 32 * 32;
  return r->published[size_t(warp_base + src)];
}

cudaError_t enqueue_launch(Launch* l, cudaStream_t stream) {
  std::shared_ptr<Launch> owned(l);
  const unsigned n = threads_of(l->block);
  if (n == 0 || n > 1024 || l->block.z > 64 || l->grid.x == 0 || l->grid.y == 0 || l->grid.z == 0 ||
      l->grid.y > 65535 || l->grid.z > 65535)
    return set_error(cudaErrorInvalidValue);  // "invalid configuration argument"
  CUstream_st* s = stream_of(stream);
  if (!s) return set_error(cudaErrorInvalidDevice);
  count(Counter::Kernel, l->kernel);
  enqueue(s, [owned] {
    run_launch(owned.get());
    return true;
  });
  return cudaSuccess;
}

}  // namespace cuda_emu
