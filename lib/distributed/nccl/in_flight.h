// The NCCL group's collectives that were issued and not yet seen complete, oldest first (torch's
// ProcessGroupNCCL keeps the same list for its watchdog). The host does not wait in an NCCL
// collective, so a collective that a peer never joins shows only here: the hang watchdog's
// thread asks for the oldest one (activity, collective_progress) while the training thread may
// be blocked at a stream sync behind it. Thread-safe; it never waits for the device.
#pragma once
#include <cuda_runtime.h>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

namespace tr::distributed {

// A collective's completion event, shared by its Work and the list: destroyed when both are done.
struct DoneEvent {
  cudaEvent_t event = nullptr;
  DoneEvent();
  ~DoneEvent();
  DoneEvent(const DoneEvent&) = delete;
  DoneEvent& operator=(const DoneEvent&) = delete;
};

class InFlightCollectives {
 public:
  explicit InFlightCollectives(int device) : device_(device) {}

  void add(uint64_t tag, std::string name, std::shared_ptr<DoneEvent> done);
  // Collective `tag` completed, and so did every one before it (one stream runs them in order).
  void completed_through(uint64_t tag);

  struct Oldest {
    uint64_t tag = 0;  // 0: none in flight
    std::string name;
    double seconds = 0;  // since it was issued
    size_t behind = 0;   // issued after it, not complete either
  };
  // The oldest collective whose event has not completed; the completed ones leave the list.
  Oldest oldest();

 private:
  struct Entry {
    uint64_t tag;
    std::string name;
    std::chrono::steady_clock::time_point issued;
    std::shared_ptr<DoneEvent> done;
  };
  int device_;
  std::mutex mu_;
  std::deque<Entry> entries_;
};

}  // namespace tr::distributed
