// Adapts Tensors to the raw kernel arguments of launch.h: broadcast strides with merged dims,
// host scalars (0-dim CPU tensors next to CUDA tensors), reduction geometry, the current device.
#pragma once
#include <cstring>
#include <map>
#include <mutex>
#include <type_traits>
#include <vector>
#include "core/cuda/device_guard.h"
#include "core/tensor.h"
#include "ops/cuda/launch.h"

namespace tr::cuda {

// A 0-dim CPU tensor among CUDA operands: read on the host, passed to the kernel by value.
bool is_host_scalar(const Tensor& t);
// Raw bits of the single element of a CPU tensor (zero-extended to 64 bits).
uint64_t scalar_bits(const Tensor& t);
// Raw bits of `v` converted to `t` by the CPU's rules (fill_).
uint64_t value_bits(double v, DType t);

// Launch arguments of out = f(ins...) with ins broadcast to out's shape. One element normally;
// more when the merged geometry has more than kMaxDims dims (the leading dims are looped on the
// host). Empty when out has no elements.
std::vector<ElementwiseArgs> elementwise_args(const Tensor& out, const std::vector<Tensor>& ins);

// Geometry of reducing `dims` (sorted, unique) of x. Returns false if it needs more than
// kMaxDims dims after merging (the caller then reduces a permuted contiguous copy).
bool reduce_args(const Tensor& x, const Shape& dims, ReduceArgs& a);

// The library handle of `device`, made by create() (with the device current) on first use and
// kept for the life of the process (destroying it at exit could race the CUDA runtime's teardown).
template <typename Handle, typename Create> Handle per_device_handle(int device, Create create) {
  static std::mutex mu;
  static std::map<int, Handle> handles;
  std::lock_guard<std::mutex> lock(mu);
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  DeviceGuard g(device);
  return handles[device] = create();
}

// Bytes of scratch memory on `device` for one launch (freed to the caching allocator when the
// returned tensor dies; stream order makes the reuse safe).
Tensor workspace(size_t bytes, Device device);

// A multi-tensor launch's two tables (its tensors, then their chunks) on the device: one
// workspace, filled by one staged copy (no host wait).
template <typename A, typename B> struct DeviceTables {
  Tensor buffer;  // owns both
  const A* a = nullptr;
  const B* b = nullptr;
};
void upload_bytes(void* device_dst, Device device, const std::vector<unsigned char>& host);
template <typename A, typename B>
DeviceTables<A, B> upload_tables(const std::vector<A>& a, const std::vector<B>& b, Device device) {
  static_assert(std::is_trivially_copyable_v<A> && std::is_trivially_copyable_v<B>);
  const size_t na = a.size() * sizeof(A), nb = b.size() * sizeof(B);
  const size_t off = (na + alignof(B) - 1) / alignof(B) * alignof(B);
  std::vector<unsigned char> host(off + nb);
  if (na) std::memcpy(host.data(), a.data(), na);
  if (nb) std::memcpy(host.data() + off, b.data(), nb);
  DeviceTables<A, B> t;
  t.buffer = workspace(host.size(), device);
  upload_bytes(t.buffer.raw_data(), device, host);
  t.a = static_cast<const A*>(t.buffer.raw_data());
  t.b = reinterpret_cast<const B*>(static_cast<const unsigned char*>(t.buffer.raw_data()) + off);
  return t;
}

}  // namespace tr::cuda
