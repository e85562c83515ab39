// DistributedDataParallel (torch.nn.parallel.DistributedDataParallel): every rank holds a replica;
// at construction rank 0's parameters and buffers are broadcast; before each forward its buffers
// are (broadcast_buffers); during backward, gradients are averaged over the ranks in buckets of
// about bucket_mb, each bucket's allreduce starting from the post-accumulate-grad hooks as soon as
// all its gradients are ready, so communication overlaps the rest of backward.
//
// Usage per step:  ddp.prepare(sync);  loss = f(ddp.forward(x));  loss.backward();  ddp.finish();
// With sync = false (accumulation micro-batches, torch's no_sync) gradients stay local and add up;
// the next synced backward averages the sum.
//
// Sharding (ZeRO stages 1 and 2, DeepSpeed's names; [dist] shard): each bucket's flat space is
// padded to a multiple of the world size and split in as many equal windows; rank r owns window r
// of every bucket. shard_pieces() are the parts of parameters in this rank's windows, each with a
// `view` sharing the parameter's storage: the optimizer holds those views instead of the
// parameters (sharded_optimizer.h), so it keeps state for 1/world of the elements. In backward each
// bucket is reduce-scattered (same overlap as the allreduce), which leaves the averaged gradient
// of this rank's window only; finish() gives the views their gradients and the parameters none.
// After the optimizer step, gather_params() all-gathers the windows back into every parameter.
//   Shard::Optimizer (ZeRO-1): the buckets are kept between steps, as DDP's are.
//   Shard::Gradients (ZeRO-2): a bucket exists from its first gradient until it is reduced, and
//   each gradient is copied into it and freed as soon as backward has it: no full-size gradient
//   buffer stays, and a bucket's gradients never exist twice.
// Accumulation micro-batches (sync = false) add up full local gradients, as DDP's no_sync does
// (torch FSDP's no_sync too); the synced micro-batch reduces their sum, so the numbers are DDP's.
#pragma once
#include <memory>
#include <string>
#include <vector>
#include "distributed/process_group.h"
#include "nn/module.h"
#include "core/error.h"

namespace tr::distributed {

enum class Shard { None, Optimizer, Gradients };  // [dist] shard = "none" | "optimizer" | "gradients"
const char* shard_name(Shard s);
Shard parse_shard(const std::string& name);  // throws naming the valid names

// The elements [begin, begin + numel) of the flattened parameter params()[param] that lie in this
// rank's window of its bucket, at `offset` in that window.
struct ShardPiece {
  size_t param = 0;
  int64_t begin = 0, numel = 0;
  size_t bucket = 0;
  int64_t offset = 0;
  Tensor view;  // those elements, a 1-d view of the parameter's storage (a leaf without grad_fn)
};

struct DDPOptions {
  double bucket_mb = 25.0;
  bool broadcast_buffers = true;
  // Parameters may get no gradient in a step (unused branches). Buckets are then reduced after
  // backward, in order, with zeros for the missing gradients.
  bool find_unused_parameters = false;
  Shard shard = Shard::None;
};

class DistributedDataParallel {
 public:
  DistributedDataParallel(nn::Module& module, ProcessGroup& pg, DDPOptions opts = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Before the forward of a step (or micro-batch): broadcasts buffers and arms the gradient hooks
  // when `sync` (the micro-batch whose backward must average gradients).
  void prepare(bool sync = true);
  Tensor forward(const Tensor& x);
  // After backward: waits for the buckets and writes the averaged gradients into param.grad.
  void finish();

  ProcessGroup& process_group() { return pg_; }
  size_t num_buckets() const { return buckets_.size(); }

  // ---- sharding ----
  Shard shard() const { return opts_.shard; }
  bool sharded() const { return opts_.shard != Shard::None; }
  // The parameters DDP reduces (those that require grad), in registration order, and their names.
  const std::vector<Tensor>& params() const { return params_; }
  const std::vector<std::string>& param_names() const { return names_; }
  // This rank's pieces, bucket by bucket; a parameter has at most one (it lies in one bucket).
  const std::vector<ShardPiece>& shard_pieces() const { return pieces_; }
  // Which rank's window holds element `element` of the flattened parameter `param` (every rank can
  // tell where any element lives: the layout depends only on the parameters and the world size).
  int owner_of(size_t param, int64_t element) const;
  struct BucketLayout {
    std::vector<size_t> params;    // indices into params()
    std::vector<int64_t> offsets;  // of each parameter in the bucket's flat space, and the end
    int64_t window = 0;            // elements per rank: the flat space padded to world * window
  };
  std::vector<BucketLayout> bucket_layouts() const;
  // After the optimizer stepped the shard views: every rank's windows, all-gathered into every
  // parameter (a collective; a no-op without sharding).
  void gather_params();

 private:
  struct Bucket {
    std::vector<size_t> params;    // indices into params_
    std::vector<int64_t> offsets;  // of each parameter in flat, and the end
    Tensor flat;                   // the gradients, concatenated (sharded: padded to world * window)
    int64_t window = 0;            // sharded: elements of flat per rank
    Tensor shard_grad;             // sharded: this rank's window of the reduced gradients
    size_t ready = 0;
    std::shared_ptr<Work> work;
  };
  void on_grad_ready(size_t param_index);
  void launch(Bucket& b);
  // gradient s of the bucket, times 1 / world size, into its slot (zeros without one)
  void copy_into_bucket(Bucket& b, size_t s);
  void broadcast_buffers();
  void build_shards();
  // finish() of a sharded step: the views' gradients from the reduced windows
  void finish_sharded();
  Tensor new_flat(const Bucket& b) const;

  nn::Module& module_;
  ProcessGroup& pg_;
  DDPOptions opts_;
  std::vector<std::string> names_;
  std::vector<Tensor> params_;
  std::vector<size_t> bucket_of_;  // param -> its bucket
  std::vector<size_t> slot_of_;    // param -> its index in the bucket's params
  std::vector<Bucket> buckets_;
  std::vector<char> seen_;      // this backward: the parameter's gradient is ready
  std::vector<char> had_grad_;  // when copied into its bucket: the parameter had a gradient here
  std::vector<char> copied_;    // this backward: the gradient is in its bucket
  std::vector<int> hooks_;
  std::vector<ShardPiece> pieces_;
  bool armed_ = false;
};

}  // namespace tr::distributed
