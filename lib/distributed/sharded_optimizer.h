// The optimizer side of ZeRO (torch's ZeroRedundancyOptimizer, over DDP's shard windows, ddp.h):
// the optimizer's groups hold this rank's views of the parameters instead of the parameters, so
// its state covers only this rank's elements. Everything else about the optimizer is unchanged:
// groups and their hyperparameters (schedulers set them), step counts, the GradScaler.
//
// Checkpoints keep one layout for every world size and shard setting: state_dict() gathers the
// shards into torch's layout over the full parameters (what an unsharded run saves), and
// load_state_dict() takes such a state and keeps this rank's pieces, so any checkpoint resumes on
// any world size with any [dist] shard.
#pragma once
#include <cstdint>
#include <vector>
#include "distributed/ddp.h"
#include "optim/optimizer_state.h"

namespace tr::distributed {

class ShardedOptimizer {
 public:
  // Replaces each group's parameters by this rank's views of them, in the group's order; a
  // parameter with no piece on this rank leaves the group here. Every parameter of `opt` must be
  // one DDP reduces. Call before any step and before load_state_dict.
  ShardedOptimizer(optim::Optimizer& opt, DistributedDataParallel& ddp);
  ShardedOptimizer(const ShardedOptimizer&) = delete;
  ShardedOptimizer& operator=(const ShardedOptimizer&) = delete;

  // Collective (every rank calls it). torch's layout over the full parameters, complete on rank 0;
  // the other ranks get the groups without tensors. Per bucket and state key, each rank's window
  // is all-gathered (one bucket's worth of memory at a time besides the result).
  optim::OptimizerState state_dict();
  // Every rank: a state in the full layout (a checkpoint of any run), checked as
  // optim::load_state_dict checks it; each rank keeps the pieces of its views.
  void load_state_dict(const optim::OptimizerState& s);

  // The GradScaler's found_inf over the ranks (any), and clip_grad_norm's partial norms (sum, or
  // max): each one collective.
  bool any(bool local);
  double reduce(double local, bool is_max);

 private:
  // The groups as built (full parameters, from param_), swapped in while a full-layout state is
  // made or read.
  void swap_in_full();
  void swap_in_views();
  // The views' states (handles), and the views swapped back in with these states as the only ones.
  std::vector<std::pair<Tensor, optim::ParamState>> view_states() const;
  void set_view_states(std::vector<std::pair<Tensor, optim::ParamState>> states);

  optim::Optimizer& opt_;
  DistributedDataParallel& ddp_;
  std::vector<std::vector<Tensor>> views_;  // each group's views on this rank
  std::vector<std::vector<size_t>> param_;  // each group's parameters' indices in ddp.params()
  std::vector<int> piece_of_;               // ddp.params() index -> its piece on this rank, or -1
};

}  // namespace tr::distributed
