// CUDA hooks for builds without the toolkit: no devices, clear errors.
#include "core/cuda_hooks.h"
#include <cstring>
#include "core/error.h"

namespace tr::cuda {

bool is_compiled() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() {
  return "this build of trainer has no CUDA support (the CUDA toolkit was not found at build time)";
}
bool is_available() { return false; }
void memcpy(void* dst, Device dd, const void* src, Device sd, size_t n) {
  TR_CHECK(dd.is_cpu() && sd.is_cpu(), "copy between ", sd.str(), " and ", dd.str(), ": ", unavailable_reason());
  std::memcpy(dst, src, n);
}
void synchronize(int) {}
void set_device(int index) { throw Error(str("cuda:", index, ": ", unavailable_reason())); }
void set_after_sync_hook(void (*)()) {}  // no device: nothing is ever deferred
void* alloc_pinned(size_t) { throw Error(str("pinned host memory: ", unavailable_reason())); }
void free_pinned(void*) {}
void range_push(const char*) {}
void range_pop() {}
std::string device_description(int index) { return str("cuda:", index, ": ", unavailable_reason()); }

}  // namespace tr::cuda
