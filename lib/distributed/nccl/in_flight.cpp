#include "distributed/nccl/in_flight.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"

namespace tr::distributed {

DoneEvent::DoneEvent() { TR_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming)); }
DoneEvent::~DoneEvent() {
  if (event) cudaEventDestroy(event);
}

void InFlightCollectives::add(uint64_t tag, std::string name, std::shared_ptr<DoneEvent> done) {
  std::lock_guard<std::mutex> g(mu_);
  entries_.push_back({tag, std::move(name), std::chrono::steady_clock::now(), std::move(done)});
}

void InFlightCollectives::completed_through(uint64_t tag) {
  std::lock_guard<std::mutex> g(mu_);
  while (!entries_.empty() && entries_.front().tag <= tag) entries_.pop_front();
}

InFlightCollectives::Oldest InFlightCollectives::oldest() {
  std::lock_guard<std::mutex> g(mu_);
  if (entries_.empty()) return {};
  // the caller's thread (the watchdog's) gets the group's device current: querying from another
  // device's context would create one there
  cuda::DeviceGuard dg(device_);
  while (!entries_.empty()) {
    const cudaError_t e = cudaEventQuery(entries_.front().done->event);
    if (e == cudaErrorNotReady) break;
    if (e != cudaSuccess) cudaGetLastError();  // a failed stream is the Work's to report, not the list's
    entries_.pop_front();
  }
  if (entries_.empty()) return {};
  const Entry& f = entries_.front();
  return {f.tag, f.name, std::chrono::duration<double>(std::chrono::steady_clock::now() - f.issued).count(),
          entries_.size() - 1};
}

}  // namespace tr::distributed
