// DistributedDataParallel (torch.nn.parallel.DistributedDataParallel): every rank holds a replica;
// at construction rank 0's parameters and buffers are broadcast; before each forward its buffers
// are (broadcast_buffers); during backward, gradients are averaged over the ranks in buckets of
// about bucket_mb, each bucket's allreduce starting from the post-accumulate-grad hooks as soon as
// all its gradients are ready, so communication overlaps the rest of backward.
//
// Usage per step:  ddp.prepare(sync);  loss = f(ddp.forward(x));  loss.backward();  ddp.finish();
// With sync = false (accumulation micro-batches, torch's no_sync) gradients stay local and add up;
// the next synced backward averages the sum.
#pragma once
#include <memory>
#include <string>
#include <vector>
#include "distributed/process_group.h"
#include "nn/module.h"

namespace tr::distributed {

struct DDPOptions {
  double bucket_mb = 25.0;
  bool broadcast_buffers = true;
  // Parameters may get no gradient in a step (unused branches). Buckets are then reduced after
  // backward, in order, with zeros for the missing gradients.
  bool find_unused_parameters = false;
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

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    std::vector<int64_t> offsets;  // of each parameter in flat, and the end
    Tensor flat;                 // the gradients, concatenated
    size_t ready = 0;
    std::shared_ptr<Work> work;
  };
  void on_grad_ready(size_t param_index);
  void launch(Bucket& b);
  void broadcast_buffers();

  nn::Module& module_;
  ProcessGroup& pg_;
  DDPOptions opts_;
  std::vector<std::string> names_;
  std::vector<Tensor> params_;
  std::vector<size_t> bucket_of_;  // param -> its bucket
  std::vector<Bucket> buckets_;
  std::vector<char> seen_;  // this backward: the parameter's gradient is ready
  std::vector<int> hooks_;
  bool armed_ = false;
};

}  // namespace tr::distributed
