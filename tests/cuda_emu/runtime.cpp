// The emulated CUDA runtime: devices, device memory, pinned memory, streams, events and copies.
//
// Devices: TR_CUDA_EMU_DEVICES of them (default 2), each with TR_CUDA_EMU_MEMORY_MB of memory
// (default 4096); CUDA_VISIBLE_DEVICES picks among them as it does among GPUs. Device memory is
// carved from one reserved mapping per device that is PROT_NONE while host code runs: a host
// read or write of device memory stops the process with a message naming the address
// (TR_CUDA_EMU_PROTECT=0 turns the protection off). Streams queue their work; it runs, in order,
// when the host waits for the stream (a synchronous copy, a synchronize, an event query), so a
// host that reuses a buffer before the work that reads it has run sees wrong data, as on a GPU.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include "runtime_internal.h"

namespace cuda_emu {

namespace {

thread_local cudaError_t last_error = cudaSuccess;
thread_local int current_device = 0;

// One big lock: device work runs on one host thread at a time (the streams of all devices).
std::recursive_mutex& exec_mutex() {
  static std::recursive_mutex m;
  return m;
}

int64_t env_int(const char* name, int64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : dflt;
}

// ---- device memory ----

constexpr size_t kAlign = 256;
constexpr size_t kHuge = size_t(2) << 20;

struct Arena {
  unsigned char* base = nullptr;
  size_t size = 0;
  std::map<size_t, size_t> free_blocks;  // offset -> size
  std::map<size_t, size_t> used;         // offset -> size
  size_t in_use = 0;
  size_t top = 0;  // end of the highest block ever handed out: what protection toggles cover
};

struct Devices {
  std::vector<int> visible;  // emulated device behind each visible index
  std::vector<Arena> arenas;
  bool protect = true;
  int access_depth = 0;
  std::vector<std::unique_ptr<CUstream_st>> legacy;
  std::set<CUstream_st*> streams;  // created ones
  std::map<void*, size_t> pinned;
};

void install_fault_handler();

Devices& devices() {
  static Devices* d = [] {
    auto* r = new Devices;  // leaked: static destructors may still copy
    const int64_t n = std::max<int64_t>(0, env_int("TR_CUDA_EMU_DEVICES", 2));
    const char* vis = std::getenv("CUDA_VISIBLE_DEVICES");
    if (vis) {
      std::string s = vis;
      size_t i = 0;
      while (i < s.size()) {
        size_t j = s.find(',', i);
        std::string tok = s.substr(i, j == std::string::npos ? std::string::npos : j - i);
        char* end = nullptr;
        long v = std::strtol(tok.c_str(), &end, 10);
        if (tok.empty() || *end || v < 0 || v >= n) break;  // CUDA stops at the first invalid entry
        r->visible.push_back(int(v));
        if (j == std::string::npos) break;
        i = j + 1;
      }
    } else {
      for (int i = 0; i < n; ++i) r->visible.push_back(i);
    }
    const size_t bytes = size_t(std::max<int64_t>(1, env_int("TR_CUDA_EMU_MEMORY_MB", 4096))) << 20;
    r->protect = env_int("TR_CUDA_EMU_PROTECT", 1) != 0;
    for (size_t i = 0; i < r->visible.size(); ++i) {
      Arena a;
      a.size = bytes;
      // 2 MiB aligned and backed by huge pages where the kernel allows: a protection toggle then
      // rewrites one entry per 2 MiB instead of one per 4 KiB page
      void* p = mmap(nullptr, bytes + kHuge, r->protect ? PROT_NONE : PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) fatal("cannot reserve " + std::to_string(bytes) + " bytes of emulated device memory");
      a.base = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(p) + kHuge - 1) / kHuge * kHuge);
      madvise(a.base, bytes, MADV_HUGEPAGE);
      a.free_blocks[0] = bytes;
      r->arenas.push_back(std::move(a));
      auto s = std::make_unique<CUstream_st>();
      s->device = int(i);
      s->legacy = true;
      r->legacy.push_back(std::move(s));
    }
    return r;
  }();
  static const bool handler = (install_fault_handler(), true);
  (void)handler;
  return *d;
}

// Only the part of each arena that blocks were ever handed out from (first fit keeps it compact):
// toggling a whole reservation would cost its page tables on every wait for the device.
void set_protection(int prot) {
  Devices& d = devices();
  for (auto& a : d.arenas)
    if (a.top && mprotect(a.base, std::min(a.size, (a.top + kHuge - 1) / kHuge * kHuge), prot) != 0)
      fatal("mprotect of emulated device memory failed");
}

struct sigaction previous_handler {};  // whoever handled SIGSEGV before us (a test framework, say)

void fault_handler(int sig, siginfo_t* info, void* uctx) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  Devices& d = devices();
  for (size_t i = 0; i < d.arenas.size(); ++i) {
    const auto b = reinterpret_cast<uintptr_t>(d.arenas[i].base);
    if (addr >= b && addr < b + d.arenas[i].size) {
      char msg[256];
      int n = std::snprintf(msg, sizeof msg,
                            "cuda emulator: host code read or wrote device memory at %p (cuda:%zu + %zu); "
                            "copy it to the host with cudaMemcpy first\n",
                            info->si_addr, i, size_t(addr - b));
      if (n > 0) (void)!write(2, msg, size_t(n));
      signal(SIGABRT, SIG_DFL);
      abort();
    }
  }
  // not ours: whoever was there before, or the default action once the handler returns
  if (previous_handler.sa_flags & SA_SIGINFO && previous_handler.sa_sigaction) {
    previous_handler.sa_sigaction(sig, info, uctx);
  } else if (previous_handler.sa_handler != SIG_DFL && previous_handler.sa_handler != SIG_IGN &&
             previous_handler.sa_handler) {
    previous_handler.sa_handler(sig);
  } else {
    signal(sig, SIG_DFL);
  }
}

// (Re)installs the handler when someone else took SIGSEGV meanwhile (Catch2 installs its own for
// every test case): called whenever host code gets control back from device work.
void install_fault_handler() {
  struct sigaction cur {};
  sigaction(SIGSEGV, nullptr, &cur);
  if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == fault_handler) return;
  previous_handler = cur;
  struct sigaction sa {};
  sa.sa_sigaction = fault_handler;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, nullptr);
}

bool valid_device(int dev) { return dev >= 0 && dev < int(devices().visible.size()); }

}  // namespace

DeviceAccess::DeviceAccess() {
  Devices& d = devices();
  if (d.access_depth++ == 0 && d.protect) set_protection(PROT_READ | PROT_WRITE);
}
DeviceAccess::~DeviceAccess() {
  Devices& d = devices();
  if (--d.access_depth == 0 && d.protect) {
    set_protection(PROT_NONE);
    install_fault_handler();
  }
}

int device_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  Devices& d = devices();
  for (size_t i = 0; i < d.arenas.size(); ++i) {
    const auto b = reinterpret_cast<uintptr_t>(d.arenas[i].base);
    if (a >= b && a < b + d.arenas[i].size) return int(i);
  }
  return -1;
}

bool all_on_device(int device, std::initializer_list<const void*> ps) {
  for (const void* p : ps)
    if (p && device_of(p) != device) return false;
  return true;
}

int handle_device() { return valid_device(current_device) ? current_device : -1; }

cudaError_t set_error(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
  return e;
}

void fatal(const std::string& what) {
  std::fprintf(stderr, "cuda emulator: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

CUstream_st* stream_of(cudaStream_t s) {
  Devices& d = devices();
  if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) {
    if (!valid_device(current_device)) return nullptr;
    return d.legacy[size_t(current_device)].get();
  }
  return s;
}

void enqueue(CUstream_st* s, std::function<bool()> item) {
  std::lock_guard<std::recursive_mutex> g(exec_mutex());
  s->queue.push_back(std::move(item));
}

bool progress(CUstream_st* s, bool blocking) {
  while (true) {
    {
      std::lock_guard<std::recursive_mutex> g(exec_mutex());
      if (s->queue.empty()) return true;
      DeviceAccess access;
      while (!s->queue.empty()) {
        std::function<bool()> item = s->queue.front();  // a copy: the item may enqueue more work
        if (!item()) break;
        s->queue.pop_front();
      }
      if (s->queue.empty()) return true;
    }
    if (!blocking) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));  // a peer's collective, say
  }
}

namespace {

void sync_device(int dev) {
  Devices& d = devices();
  progress(d.legacy[size_t(dev)].get(), true);
  std::vector<CUstream_st*> ss;
  {
    std::lock_guard<std::recursive_mutex> g(exec_mutex());
    for (auto* s : d.streams)
      if (s->device == dev) ss.push_back(s);
  }
  for (auto* s : ss) progress(s, true);
}

bool is_pinned(const void* p) {
  Devices& d = devices();
  std::lock_guard<std::recursive_mutex> g(exec_mutex());
  auto it = d.pinned.upper_bound(const_cast<void*>(p));
  if (it == d.pinned.begin()) return false;
  --it;
  return static_cast<const unsigned char*>(p) < static_cast<unsigned char*>(it->first) + it->second;
}

// The checks cudaMemcpy does: direction against where the pointers live.
cudaError_t check_copy(void* dst, const void* src, cudaMemcpyKind kind) {
  const bool dd = device_of(dst) >= 0, sd = device_of(src) >= 0;
  switch (kind) {
    case cudaMemcpyHostToDevice: return dd && !sd ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToHost: return sd && !dd ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToDevice: return dd && sd ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyHostToHost: return !dd && !sd ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDefault: return cudaSuccess;
  }
  return cudaErrorInvalidValue;
}

}  // namespace

}  // namespace cuda_emu

using namespace cuda_emu;

// ---- errors ----

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    default: return "cudaErrorUnknown";
  }
}
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    default: return "unknown error";
  }
}
cudaError_t cudaGetLastError() {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return last_error; }

// ---- devices ----

cudaError_t cudaGetDeviceCount(int* count) {
  *count = int(devices().visible.size());
  return *count ? cudaSuccess : set_error(cudaErrorNoDevice);
}
cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device)) return set_error(cudaErrorInvalidDevice);
  current_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = current_device;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!valid_device(device)) return set_error(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "CUDA emulator device %d (tests/cuda_emu)",
                devices().visible[size_t(device)]);
  prop->totalGlobalMem = devices().arenas[size_t(device)].size;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 4;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!valid_device(device)) return set_error(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = 4; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; return cudaSuccess;
  }
  return set_error(cudaErrorInvalidValue);
}
cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  if (!valid_device(current_device)) return set_error(cudaErrorInvalidDevice);
  count(Counter::HostWait);
  sync_device(current_device);
  return cudaSuccess;
}

// ---- memory ----

cudaError_t cudaMalloc(void** p, size_t n) {
  *p = nullptr;
  if (!valid_device(current_device)) return set_error(cudaErrorInvalidDevice);
  std::lock_guard<std::recursive_mutex> g(exec_mutex());
  Arena& a = devices().arenas[size_t(current_device)];
  const size_t want = std::max<size_t>(kAlign, (n + kAlign - 1) / kAlign * kAlign);
  for (auto it = a.free_blocks.begin(); it != a.free_blocks.end(); ++it) {
    if (it->second < want) continue;
    const size_t off = it->first, left = it->second - want;
    a.free_blocks.erase(it);
    if (left) a.free_blocks[off + want] = left;
    a.used[off] = want;
    a.in_use += want;
    note_device_bytes(current_device, a.in_use);
    if (off + want > a.top) {
      a.top = off + want;
      // the newly covered pages take the protection of the moment
      Devices& d = devices();
      if (d.protect && d.access_depth > 0) set_protection(PROT_READ | PROT_WRITE);
    }
    *p = a.base + off;
    return cudaSuccess;
  }
  return set_error(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  const int dev = device_of(p);
  if (dev < 0) return set_error(cudaErrorInvalidValue);
  count(Counter::HostWait);
  sync_device(dev);  // cudaFree waits for the device, as CUDA's does
  std::lock_guard<std::recursive_mutex> g(exec_mutex());
  Arena& a = devices().arenas[size_t(dev)];
  const size_t off = size_t(static_cast<unsigned char*>(p) - a.base);
  auto it = a.used.find(off);
  if (it == a.used.end()) return set_error(cudaErrorInvalidValue);
  size_t start = off, size = it->second;
  a.in_use -= size;
  a.used.erase(it);
  // coalesce with the free neighbours
  auto next = a.free_blocks.find(start + size);
  if (next != a.free_blocks.end()) {
    size += next->second;
    a.free_blocks.erase(next);
  }
  auto prev = a.free_blocks.lower_bound(start);
  if (prev != a.free_blocks.begin()) {
    --prev;
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      a.free_blocks.erase(prev);
    }
  }
  a.free_blocks[start] = size;
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** p, size_t n, unsigned) {
  *p = std::aligned_alloc(4096, std::max<size_t>(4096, (n + 4095) / 4096 * 4096));
  if (!*p) return set_error(cudaErrorMemoryAllocation);
  std::lock_guard<std::recursive_mutex> g(exec_mutex());
  devices().pinned[*p] = n;
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t n) { return cudaHostAlloc(p, n, 0); }
cudaError_t cudaFreeHost(void* p) {
  {
    std::lock_guard<std::recursive_mutex> g(exec_mutex());
    if (!devices().pinned.erase(p)) return set_error(cudaErrorInvalidValue);
  }
  count(Counter::HostWait);
  for (size_t i = 0; i < devices().visible.size(); ++i) sync_device(int(i));
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (!valid_device(current_device)) return set_error(cudaErrorInvalidDevice);
  std::lock_guard<std::recursive_mutex> g(exec_mutex());
  const Arena& a = devices().arenas[size_t(current_device)];
  *total_bytes = a.size;
  *free_bytes = a.size - a.in_use;
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t stream) {
  if (cudaError_t e = check_copy(dst, src, kind); e != cudaSuccess) return set_error(e);
  CUstream_st* s = stream_of(stream);
  if (!s) return set_error(cudaErrorInvalidDevice);
  if (n == 0) return cudaSuccess;
  count(Counter::Copy);
  if (device_of(src) < 0 && !is_pinned(src)) {
    // pageable source: the driver stages it before returning, so the caller may reuse it at once
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                               static_cast<const unsigned char*>(src) + n);
    enqueue(s, [dst, staged] {
      std::memcpy(dst, staged->data(), staged->size());
      return true;
    });
  } else {
    enqueue(s, [dst, src, n] {
      std::memmove(dst, src, n);
      return true;
    });
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  if (cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, nullptr); e != cudaSuccess) return e;
  count(Counter::HostWait);
  progress(stream_of(nullptr), true);  // synchronous: waits for the default stream's work before it
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t stream) {
  if (n && device_of(p) < 0) return set_error(cudaErrorInvalidValue);
  CUstream_st* s = stream_of(stream);
  if (!s) return set_error(cudaErrorInvalidDevice);
  count(Counter::Copy);
  enqueue(s, [p, value, n] {
    std::memset(p, value, n);
    return true;
  });
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, size_t n) {
  if (cudaError_t e = cudaMemsetAsync(p, value, n, nullptr); e != cudaSuccess) return e;
  count(Counter::HostWait);
  progress(stream_of(nullptr), true);
  return cudaSuccess;
}

// ---- streams and events ----

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  if (!valid_device(current_device)) return set_error(cudaErrorInvalidDevice);
  auto* st = new CUstream_st;
  st->device = current_device;
  std::lock_guard<std::recursive_mutex> g(exec_mutex());
  devices().streams.insert(st);
  *s = st;
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  progress(s, true);  // pending work still completes, as in CUDA
  std::lock_guard<std::recursive_mutex> g(exec_mutex());
  if (!devices().streams.erase(s)) return set_error(cudaErrorInvalidResourceHandle);
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  CUstream_st* st = stream_of(s);
  if (!st) return set_error(cudaErrorInvalidDevice);
  count(Counter::HostWait);
  progress(st, true);
  return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t s) {
  CUstream_st* st = stream_of(s);
  if (!st) return set_error(cudaErrorInvalidDevice);
  count(Counter::Poll);
  return progress(st, false) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  auto* ev = new CUevent_st;
  ev->device = current_device;
  *e = ev;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;  // pending records and waits hold its state, not the event
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t stream) {
  CUstream_st* s = stream_of(stream);
  if (!s) return set_error(cudaErrorInvalidDevice);
  std::lock_guard<std::recursive_mutex> g(exec_mutex());
  const uint64_t n = ++e->recorded;
  e->stream = s;
  // the record's place in the stream: reached when the work before it has run
  enqueue(s, [st = e->state, n] {
    if (st->completed < n) st->completed = n;
    return true;
  });
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  count(Counter::Poll);
  if (e->state->completed >= e->recorded) return cudaSuccess;
  progress(e->stream, false);
  return e->state->completed >= e->recorded ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  count(Counter::HostWait);
  while (e->state->completed < e->recorded) {
    if (progress(e->stream, false)) continue;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t e, unsigned) {
  CUstream_st* s = stream_of(stream);
  if (!s) return set_error(cudaErrorInvalidDevice);
  std::lock_guard<std::recursive_mutex> g(exec_mutex());
  const uint64_t n = e->recorded;  // the record the wait refers to: the latest one at call time
  CUstream_st* other = e->stream;
  if (n == 0 || !other) return cudaSuccess;  // never recorded: no wait, as in CUDA
  enqueue(s, [st = e->state, n, other, s] {
    if (st->completed >= n) return true;
    if (other != s) progress(other, false);
    return st->completed >= n;
  });
  return cudaSuccess;
}
