#include "distributed/ddp.h"
#include "core/grad_mode.h"
#include "autograd/node.h"
#include "ops/ops.h"
#include <algorithm>

namespace tr::distributed {

DistributedDataParallel::DistributedDataParallel(nn::Module& module, ProcessGroup& pg, DDPOptions opts)
    : module_(module), pg_(pg), opts_(opts) {
  NoGradGuard ng;
  // every replica starts from rank 0's state
  for (auto& [name, p] : module_.named_parameters()) {
    Tensor t = p;
    pg_.broadcast(t, 0);
    if (p.requires_grad()) {
      names_.push_back(name);
      params_.push_back(p);
    }
  }
  for (auto& [name, b] : module_.named_buffers()) {
    Tensor t = b;
    pg_.broadcast(t, 0);
  }
  // Buckets in reverse registration order: backward produces the last layers' gradients first.
  const int64_t cap = std::max<int64_t>(1, int64_t(opts_.bucket_mb * 1024 * 1024));
  bucket_of_.resize(params_.size());
  slot_of_.resize(params_.size());
  for (size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = params_[k];
    const int64_t bytes = p.numel() * int64_t(p.element_size());
    bool fresh = buckets_.empty();
    if (!fresh) {
      const Bucket& last = buckets_.back();
      const Tensor& first = params_[last.params[0]];
      fresh = last.offsets.back() * int64_t(p.element_size()) + bytes > cap || first.dtype() != p.dtype() ||
              first.device() != p.device();
    }
    if (fresh) {
      buckets_.emplace_back();
      buckets_.back().offsets = {0};
    }
    Bucket& b = buckets_.back();
    bucket_of_[k] = buckets_.size() - 1;
    slot_of_[k] = b.params.size();
    b.params.push_back(k);
    b.offsets.push_back(b.offsets.back() + p.numel());
  }
  const int64_t world = pg_.size();
  for (auto& b : buckets_) {
    b.window = (b.offsets.back() + world - 1) / world;
    // ZeRO-2 keeps no bucket between steps: launch() makes it
    if (opts_.shard != Shard::Gradients) b.flat = new_flat(b);
  }
  if (sharded()) build_shards();
  seen_.assign(params_.size(), 0);
  had_grad_.assign(params_.size(), 0);
  copied_.assign(params_.size(), 0);
  for (size_t k = 0; k < params_.size(); ++k)
    hooks_.push_back(register_post_accumulate_grad_hook(params_[k], [this, k](Tensor&) { on_grad_ready(k); }));
}

// One broadcast per dtype and device, of the buffers concatenated (torch's _sync_buffers broadcasts
// coalesced too): a BatchNorm model has three buffers per layer, and each collective is a round
// trip between the ranks.
void DistributedDataParallel::broadcast_buffers() {
  NoGradGuard ng;
  std::vector<std::vector<Tensor>> groups;
  for (auto& named : module_.named_buffers()) {
    const Tensor& b = named.second;
    auto same = [&](const std::vector<Tensor>& g) { return g[0].dtype() == b.dtype() && g[0].device() == b.device(); };
    auto it = std::find_if(groups.begin(), groups.end(), same);
    if (it == groups.end())
      groups.push_back({b});
    else
      it->push_back(b);
  }
  for (auto& g : groups) {
    std::vector<Tensor> flat;
    for (auto& b : g) flat.push_back(b.reshape({-1}));
    Tensor all = g.size() == 1 && g[0].is_contiguous() ? g[0] : cat(flat, 0);
    pg_.broadcast(all, 0);
    if (pg_.rank() == 0 || all.is_same(g[0])) continue;
    int64_t at = 0;
    for (auto& b : g) {
      Tensor dst = b;
      dst.copy_(all.narrow(0, at, b.numel()).reshape(b.sizes()));
      at += b.numel();
    }
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  for (size_t k = 0; k < params_.size(); ++k) remove_post_accumulate_grad_hook(params_[k], hooks_[k]);
}

void DistributedDataParallel::prepare(bool sync) {
  if (opts_.broadcast_buffers && pg_.size() > 1) broadcast_buffers();
  armed_ = sync;
  std::fill(seen_.begin(), seen_.end(), 0);
  std::fill(copied_.begin(), copied_.end(), 0);
  for (auto& b : buckets_) {
    b.ready = 0;
    b.work.reset();
  }
}

Tensor DistributedDataParallel::forward(const Tensor& x) { return module_(x); }

void DistributedDataParallel::on_grad_ready(size_t k) {
  if (!armed_ || seen_[k]) return;
  seen_[k] = 1;
  Bucket& b = buckets_[bucket_of_[k]];
  // ZeRO-2: each gradient goes into the bucket (made by its first gradient) and is freed at once,
  // so that a bucket's gradients never exist twice (DeepSpeed's IPG bucket)
  if (opts_.shard == Shard::Gradients) {
    NoGradGuard ng;
    if (!b.flat.defined()) b.flat = new_flat(b);
    copy_into_bucket(b, slot_of_[k]);
  }
  if (++b.ready == b.params.size() && !opts_.find_unused_parameters) launch(b);
}

void DistributedDataParallel::copy_into_bucket(Bucket& b, size_t s) {
  // As torch's reducer: each gradient is divided by the world size while it is copied into the
  // bucket, grad * (1 / world_size), and the ranks' buckets are summed: one pass over the bucket
  // instead of a copy and a division after the sum.
  const double scale = 1.0 / double(pg_.size());
  const size_t k = b.params[s];
  Tensor& p = params_[k];
  Tensor dst = b.flat.narrow(0, b.offsets[s], b.offsets[s + 1] - b.offsets[s]);
  const Tensor& g = p.grad();
  had_grad_[k] = g.defined();
  copied_[k] = 1;
  if (!g.defined()) {
    dst.zero_();
    return;
  }
  // the gradient may already be the bucket's view (grads kept since the last step, accumulated in place)
  if (!(g.is_contiguous() && g.raw_data() == dst.raw_data())) dst.copy_(g.reshape({-1}));
  if (scale != 1.0) dst.mul_(scale);
  // sharded: the bucket holds it now (ZeRO-2 frees it in backward, which is the point)
  if (sharded()) p.set_grad(Tensor());
}

Tensor DistributedDataParallel::new_flat(const Bucket& b) const {
  const Tensor& p = params_[b.params[0]];
  const int64_t used = b.offsets.back(), n = sharded() ? b.window * pg_.size() : used;
  // every slot is written before it is read (each gradient, or zeros for a missing one; each
  // window before the gather); the padding is zeroed once so that it reduces to zeros
  Tensor flat = empty({n}, TensorOptions(p.dtype()).device(p.device()));
  if (n > used) flat.narrow(0, used, n - used).zero_();
  return flat;
}

void DistributedDataParallel::launch(Bucket& b) {
  NoGradGuard ng;
  if (!b.flat.defined()) b.flat = new_flat(b);
  for (size_t s = 0; s < b.params.size(); ++s)
    if (!copied_[b.params[s]]) copy_into_bucket(b, s);
  pg_.label_next(
      str("DDP bucket ", &b - buckets_.data(), " of ", buckets_.size(), " (", b.params.size(), " parameters)"));
  if (sharded())
    b.work = pg_.reduce_scatter_async(b.shard_grad, b.flat, ReduceOp::SUM);
  else
    b.work = pg_.allreduce_async(b.flat, ReduceOp::SUM);
}

void DistributedDataParallel::finish() {
  if (!armed_) return;
  armed_ = false;
  std::string missing;
  for (auto& b : buckets_) {
    if (b.work) continue;
    if (!opts_.find_unused_parameters) {
      for (size_t k : b.params)
        if (!seen_[k]) missing += (missing.empty() ? "" : ", ") + names_[k];
      continue;
    }
    launch(b);  // in bucket order, the same on every rank
  }
  TR_CHECK(missing.empty(), "DistributedDataParallel: these parameters received no gradient in this step: ", missing,
           ". Every rank must reduce every bucket; set [dist] find_unused_parameters = true when parts of the "
           "model are unused in some steps");
  if (sharded()) return finish_sharded();
  NoGradGuard ng;
  for (auto& b : buckets_) {
    b.work->synchronize_stream();  // on a GPU the optimizer's kernels wait for it, not the host
    for (size_t s = 0; s < b.params.size(); ++s) {
      Tensor& p = params_[b.params[s]];
      Tensor src = b.flat.narrow(0, b.offsets[s], b.offsets[s + 1] - b.offsets[s]).reshape(p.sizes());
      // The averaged gradient stays in the bucket: param.grad becomes its view (torch's
      // gradient_as_bucket_view), which saves copying it back. The next launch overwrites the
      // bucket, after the optimizer has used it.
      if (p.grad().defined() || seen_[b.params[s]] || max(abs(src)).item() != 0)
        p.set_grad(src);  // unused here, used elsewhere; unused everywhere stays None (torch)
    }
  }
}

}  // namespace tr::distributed
