// The emulator's internals shared by its runtime, cuBLAS, cuDNN and NCCL parts: streams as
// queues of work run in order when the host waits, and the switch that lets device work (and
// only device work) touch device memory.
#pragma once
#include <cuda_runtime.h>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>

struct CUstream_st {
  int device = 0;
  bool legacy = false;  // the device's default stream
  // Work in stream order. An item returns false while it cannot complete yet (a collective
  // waiting for its peers); it is retried, and nothing behind it runs, until it returns true.
  std::deque<std::function<bool()>> queue;
};

// What work queued for an event refers to: it outlives the event (CUDA lets an event be destroyed
// while a record or a wait on it is pending).
struct EventState {
  uint64_t completed = 0;  // records whose place in their stream was reached
};
struct CUevent_st {
  int device = 0;
  CUstream_st* stream = nullptr;  // of the last record
  uint64_t recorded = 0;          // records so far
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
};

namespace cuda_emu {

// The stream a handle names on the current device (0 and cudaStreamLegacy: its default stream).
CUstream_st* stream_of(cudaStream_t s);
// Appends work to a stream.
void enqueue(CUstream_st* s, std::function<bool()> item);
// Runs the stream's work in order: until it is empty (blocking: waiting out items that are not
// ready), or until an item is not ready (non-blocking). Returns whether it is empty.
bool progress(CUstream_st* s, bool blocking);
// Device memory is readable and writable in this scope (device work runs inside one).
class DeviceAccess {
 public:
  DeviceAccess();
  ~DeviceAccess();
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
};
// The device that owns a pointer into device memory, or -1 for host memory.
int device_of(const void* p);
// Whether every non-null pointer of ps is memory of `device` (what the libraries check of operands).
bool all_on_device(int device, std::initializer_list<const void*> ps);
// The device a library handle created now belongs to: the current one, or -1 when no device is
// visible (cublasCreate / cudnnCreate then fail with NOT_INITIALIZED).
int handle_device();
// Records `e` as the thread's last error and returns it.
cudaError_t set_error(cudaError_t e);
// Fails the process with the emulator's message (a misuse the hardware would also punish).
[[noreturn]] void fatal(const std::string& what);

// What the emulator counts as proxies of GPU speed (counters.cpp), per innermost NVTX range:
// kernels launched (a cuBLAS GEMM, a cuDNN call and an NCCL collective count one each), copies and
// memsets queued on a stream, host waits (a call that blocks the host until device work is done:
// the synchronizes, synchronous copies and memsets, cudaFree) and polls (stream or event queries).
// TR_CUDA_EMU_COUNTS=file appends them as one JSON line per process at exit.
enum class Counter { Kernel, Copy, HostWait, Poll };
// `what`: the kernel's address, for TR_CUDA_EMU_TRACE (counters.cpp)
void count(Counter c, const void* what = nullptr);
// Device bytes handed out by cudaMalloc on `device` after a change (for the peak).
void note_device_bytes(int device, size_t in_use);

}  // namespace cuda_emu
