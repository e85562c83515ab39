// The Gloo backend (CPU tensors) over TCP; allreduces between ranks of one machine through shared
// memory (shm_allreduce.h). The rendezvous goes through our Store: every rank
// records that it joined (so a rank that never does is named), then Gloo connects a full mesh.
// Collectives run on one communication thread per group, in issue order, so DDP can queue a
// bucket's allreduce from a gradient hook and keep computing. A failed collective (a dead peer, a
// timeout) breaks the group: later collectives fail at once with the first error.
#pragma once
#include <memory>
#include "distributed/process_group.h"

namespace tr::distributed {

class GlooProcessGroup : public ProcessGroup {
 public:
  // Uses opts.rank, size, timeout, prefix and hostname (the address to bind; "127.0.0.1" when
  // every rank is on this machine). Blocks until every rank has connected.
  GlooProcessGroup(Store& store, const ProcessGroupOptions& opts);
  ~GlooProcessGroup() override;

  std::string backend() const override { return "gloo"; }
  std::string describe() const override;
  // Allreduces go through shared memory (every rank on this machine, TR_DIST_SHM not 0).
  bool shared_memory() const;
  std::shared_ptr<Work> allreduce_async(Tensor& t, ReduceOp op) override;
  std::shared_ptr<Work> broadcast_async(Tensor& t, int root) override;
  std::shared_ptr<Work> allgather_async(const Tensor& t, std::vector<Tensor>& out) override;
  std::shared_ptr<Work> barrier_async() override;
  // Through shared memory when the group has it (f32 and f64; else the default, an allreduce).
  std::shared_ptr<Work> reduce_scatter_async(Tensor& output, Tensor& input, ReduceOp op) override;
  // Gloo's allgather into the flat output, or through shared memory.
  std::shared_ptr<Work> allgather_into_async(Tensor& output, const Tensor& input) override;
  std::string activity() const override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tr::distributed
