// The CUDA runtime API as the CUDA emulator provides it (tests/cuda_emu): the subset the
// project's host code and kernels use, with the documented semantics, executed on the CPU. Kernels
// are plain C++ functions run as grid x block loops (ucontext fibers where they meet barriers or
// warp shuffles); device memory is host memory that host code may not touch (it is mapped
// PROT_NONE except while device work runs); streams queue their work and run it, in order, when
// the host waits for them. Only the emulation build (scripts/build.sh --cuda-emulation) sees this
// header; the product binary never contains the emulator.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- errors ----
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchFailure = 719,
  cudaErrorUnknown = 999,
};
typedef cudaError_t cudaError;
const char* cudaGetErrorString(cudaError_t e);
const char* cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();

// ---- types ----
struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaHostAllocDefault 0x00

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int major, minor;
  int multiProcessorCount;
  int warpSize;
  int maxThreadsPerBlock;
};
enum cudaDeviceAttr { cudaDevAttrMaxThreadsPerBlock = 1, cudaDevAttrMultiProcessorCount = 16 };
// library_types.h
enum cudaDataType_t {
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_16F = 2,
  CUDA_R_8I = 3,
  CUDA_R_32I = 10,
  CUDA_R_16BF = 14,
};
typedef cudaDataType_t cudaDataType;
enum libraryPropertyType_t { MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL };
typedef libraryPropertyType_t libraryPropertyType;

// ---- devices, memory, streams, events ----
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaRuntimeGetVersion(int* v);
cudaError_t cudaDriverGetVersion(int* v);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMalloc(void** p, size_t n);
cudaError_t cudaFree(void* p);
cudaError_t cudaHostAlloc(void** p, size_t n, unsigned flags);
cudaError_t cudaMallocHost(void** p, size_t n);
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s = 0);
cudaError_t cudaMemset(void* p, int value, size_t n);
cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t s = 0);
cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags = 0);
cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);

// ---- device code ----
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
// shared memory: one instance per host thread, which runs one block's fibers at a time
#define __shared__ static thread_local
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict

extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;
constexpr int warpSize = 32;

namespace cuda_emu {
// A block barrier / a warp exchange point of the running fiber (throws outside a kernel).
void block_barrier();
// Lane `lane` of the current warp publishes `bits` and receives the bits lane `src` published.
uint64_t warp_exchange(uint64_t bits, int src);
int lane_id();
}  // namespace cuda_emu

inline void __syncthreads() { cuda_emu::block_barrier(); }

template <typename T> T __shfl_xor_sync(unsigned /*mask*/, T v, int lane_mask, int width = 32) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "__shfl_xor_sync: value of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  const int lane = cuda_emu::lane_id();
  int src = lane ^ lane_mask;
  if (src / width != lane / width) src = lane;  // outside the segment: own value, as the hardware
  bits = cuda_emu::warp_exchange(bits, src);
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}
template <typename T> T __shfl_down_sync(unsigned /*mask*/, T v, unsigned delta, int width = 32) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  const int lane = cuda_emu::lane_id();
  int src = lane + int(delta);
  if (src / width != lane / width || src >= 32) src = lane;
  bits = cuda_emu::warp_exchange(bits, src);
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}

// Atomics: blocks may run on several host threads at once, so these are real atomics.
template <typename T> T atomicAdd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }
template <typename T> T atomicCAS(T* p, T compare, T v) {
  std::atomic_ref<T>(*p).compare_exchange_strong(compare, v);
  return compare;  // the old value, whether or not the exchange happened
}
template <typename T> T atomicMin(T* p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (v < old && !a.compare_exchange_weak(old, v)) {}
  return old;
}
template <typename T> T atomicMax(T* p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (v > old && !a.compare_exchange_weak(old, v)) {}
  return old;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}

// ---- kernel launches: the emulation's <<<grid, block, shared, stream>>> ----
namespace cuda_emu {

// A launch's work: run(block, thread) calls the kernel with its arguments for one thread.
struct Launch {
  const void* kernel;  // identity, for the barrier-use cache
  dim3 grid, block;
  virtual void run_thread() = 0;  // threadIdx / blockIdx already set
  virtual ~Launch() = default;
};
// Queues the launch on `stream` (of the current device); returns the launch error, if any.
cudaError_t enqueue_launch(Launch* l, cudaStream_t stream);

template <typename... P> struct LaunchOf : Launch {
  void (*fn)(P...);
  std::tuple<std::decay_t<P>...> args;
  template <typename... A> LaunchOf(void (*f)(P...), A&&... a) : fn(f), args(std::forward<A>(a)...) {}
  void run_thread() override { std::apply(fn, args); }
};

template <typename... P, typename... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t /*shared*/, cudaStream_t stream, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "kernel launch: wrong number of arguments");
  auto* l = new LaunchOf<P...>(kernel, std::forward<A>(args)...);
  l->kernel = reinterpret_cast<const void*>(kernel);
  l->grid = grid;
  l->block = block;
  enqueue_launch(l, stream);
}

}  // namespace cuda_emu
