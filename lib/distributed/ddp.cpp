#include "distributed/ddp.h"
#include "core/grad_mode.h"
#include "autograd/node.h"
#include "ops/ops.h"

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
    if (fresh) buckets_.push_back(Bucket{{}, {0}});
    Bucket& b = buckets_.back();
    bucket_of_[k] = buckets_.size() - 1;
    b.params.push_back(k);
    b.offsets.push_back(b.offsets.back() + p.numel());
  }
  for (auto& b : buckets_)
    b.flat = zeros({b.offsets.back()}, TensorOptions(params_[b.params[0]].dtype()).device(params_[b.params[0]].device()));
  seen_.assign(params_.size(), 0);
  for (size_t k = 0; k < params_.size(); ++k)
    hooks_.push_back(register_post_accumulate_grad_hook(params_[k], [this, k](Tensor&) { on_grad_ready(k); }));
}

DistributedDataParallel::~DistributedDataParallel() {
  for (size_t k = 0; k < params_.size(); ++k) remove_post_accumulate_grad_hook(params_[k], hooks_[k]);
}

void DistributedDataParallel::prepare(bool sync) {
  if (opts_.broadcast_buffers && pg_.size() > 1) {
    NoGradGuard ng;
    for (auto& [name, b] : module_.named_buffers()) {
      Tensor t = b;
      pg_.broadcast(t, 0);
    }
  }
  armed_ = sync;
  std::fill(seen_.begin(), seen_.end(), 0);
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
  if (++b.ready == b.params.size() && !opts_.find_unused_parameters) launch(b);
}

void DistributedDataParallel::launch(Bucket& b) {
  NoGradGuard ng;
  for (size_t s = 0; s < b.params.size(); ++s) {
    const Tensor& p = params_[b.params[s]];
    Tensor dst = b.flat.narrow(0, b.offsets[s], b.offsets[s + 1] - b.offsets[s]);
    if (p.grad().defined()) dst.copy_(p.grad().reshape({-1}));
    else dst.zero_();
  }
  b.work = pg_.allreduce_async(b.flat, ReduceOp::AVG);
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
  NoGradGuard ng;
  for (auto& b : buckets_) {
    b.work->wait();
    for (size_t s = 0; s < b.params.size(); ++s) {
      Tensor& p = params_[b.params[s]];
      Tensor src = b.flat.narrow(0, b.offsets[s], b.offsets[s + 1] - b.offsets[s]).reshape(p.sizes());
      if (p.grad().defined()) {
        Tensor g = p.grad();
        g.copy_(src);
      } else if (seen_[b.params[s]] || max(abs(src)).item() != 0) {
        p.set_grad(src.clone());  // unused here, used elsewhere; unused everywhere stays None (torch)
      }
    }
  }
}

}  // namespace tr::distributed
