// The NCCL backend (CUDA tensors). Built only with CUDA (lib/distributed/nccl/nccl_process_group.cpp);
// make_process_group("nccl") says so in a build without it. Rank 0's ncclUniqueId goes through
// the Store; the communicator is non-blocking, so initialisation and every collective are polled
// against the timeout and the communicator is aborted when one runs out: an Error naming the
// collective (and, from the arrival log, the rank that did not arrive), never a hang.
//
// Collectives are enqueued on the group's own stream, after the work already queued on the
// default stream (kernels here run there), so a bucket's allreduce overlaps the rest of backward.
// Work::wait() blocks the host until the result is there. The collectives issued and not yet
// complete are listed (activity(), collective_progress()) for the hang watchdog, whose thread
// aborts the communicator (abort()) before the process exits.
#pragma once
#include <memory>
#include "distributed/process_group.h"

namespace tr::distributed {

class NcclProcessGroup : public ProcessGroup {
 public:
  // Uses opts.rank, size, timeout, prefix and cuda_device (-1: rank % device count).
  NcclProcessGroup(Store& store, const ProcessGroupOptions& opts);
  ~NcclProcessGroup() override;

  std::string backend() const override { return "nccl"; }
  Device device() const override;  // cuda:N, the GPU this rank drives
  std::shared_ptr<Work> allreduce_async(Tensor& t, ReduceOp op) override;
  std::shared_ptr<Work> broadcast_async(Tensor& t, int root) override;
  std::shared_ptr<Work> allgather_async(const Tensor& t, std::vector<Tensor>& out) override;
  std::shared_ptr<Work> barrier_async() override;
  std::shared_ptr<Work> reduce_scatter_async(Tensor& output, Tensor& input, ReduceOp op) override;
  std::shared_ptr<Work> allgather_into_async(Tensor& output, const Tensor& input) override;
  std::string activity() const override;
  CollectiveProgress collective_progress() const override;
  void abort(const std::string& reason) override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tr::distributed
