// DistributedDataParallel's sharding (ZeRO-1/2, ddp.h): the windows each rank owns, the gradients
// of its pieces after the reduce-scatter, and the all-gather of the parameters after a step.
#include <algorithm>
#include "core/grad_mode.h"
#include "distributed/ddp.h"
#include "ops/ops.h"

namespace tr::distributed {

const char* shard_name(Shard s) {
  switch (s) {
    case Shard::None: return "none";
    case Shard::Optimizer: return "optimizer";
    case Shard::Gradients: return "gradients";
  }
  return "?";
}

Shard parse_shard(const std::string& name) {
  for (Shard s : {Shard::None, Shard::Optimizer, Shard::Gradients})
    if (name == shard_name(s)) return s;
  throw Error(
      str("[dist] shard = \"", name, "\": expected \"none\", \"optimizer\" (ZeRO-1) or \"gradients\" (ZeRO-2)"));
}

void DistributedDataParallel::build_shards() {
  NoGradGuard ng;
  const int64_t r = pg_.rank();
  for (size_t bi = 0; bi < buckets_.size(); ++bi) {
    Bucket& b = buckets_[bi];
    const int64_t lo = r * b.window, hi = lo + b.window;
    const Tensor& first = params_[b.params[0]];
    // ZeRO-1 reduces in place into its bucket's window; ZeRO-2 keeps only the window
    b.shard_grad = opts_.shard == Shard::Optimizer
                       ? b.flat.narrow(0, lo, b.window)
                       : zeros({b.window}, TensorOptions(first.dtype()).device(first.device()));
    for (size_t s = 0; s < b.params.size(); ++s) {
      const int64_t a = std::max(lo, b.offsets[s]), e = std::min(hi, b.offsets[s + 1]);
      if (a >= e) continue;
      const size_t k = b.params[s];
      const Tensor& p = params_[k];
      TR_CHECK(p.is_contiguous(), "[dist] shard: parameter '", names_[k], "' is not contiguous (strides ", p.strides(),
               ")");
      ShardPiece piece;
      piece.param = k;
      piece.begin = a - b.offsets[s];
      piece.numel = e - a;
      piece.bucket = bi;
      piece.offset = a - lo;
      piece.view = p.detach().view({-1}).narrow(0, piece.begin, piece.numel);
      pieces_.push_back(std::move(piece));
    }
  }
}

int DistributedDataParallel::owner_of(size_t param, int64_t element) const {
  const Bucket& b = buckets_[bucket_of_[param]];
  const int64_t flat = b.offsets[slot_of_[param]] + element;
  return int(flat / b.window);
}

std::vector<DistributedDataParallel::BucketLayout> DistributedDataParallel::bucket_layouts() const {
  std::vector<BucketLayout> r;
  for (const auto& b : buckets_) r.push_back({b.params, b.offsets, b.window});
  return r;
}

void DistributedDataParallel::finish_sharded() {
  NoGradGuard ng;
  for (auto& b : buckets_) b.work->synchronize_stream();
  if (opts_.shard == Shard::Gradients)
    for (auto& b : buckets_) b.flat = Tensor();  // its window is in shard_grad
  // A parameter gets a gradient where any rank had one (torch: unused everywhere stays None); the
  // ranks must agree, since each holds a different piece of it.
  std::vector<char> used(params_.size(), 1);
  if (opts_.find_unused_parameters) {
    std::vector<double> any(had_grad_.begin(), had_grad_.end());
    pg_.allreduce_values(any, ReduceOp::MAX, "DDP: which parameters got a gradient");
    for (size_t k = 0; k < used.size(); ++k) used[k] = any[k] != 0;
  }
  for (auto& piece : pieces_) {
    Tensor& v = piece.view;
    v.set_grad(used[piece.param] ? buckets_[piece.bucket].shard_grad.narrow(0, piece.offset, piece.numel) : Tensor());
  }
  for (auto& p : params_) p.set_grad(Tensor());  // the full gradient exists nowhere
}

void DistributedDataParallel::gather_params() {
  if (!sharded()) return;
  NoGradGuard ng;
  const int64_t r = pg_.rank();
  size_t next_piece = 0;
  for (size_t bi = 0; bi < buckets_.size(); ++bi) {
    Bucket& b = buckets_[bi];
    Tensor flat = new_flat(b);  // (a fresh buffer: ZeRO-1's bucket still holds the step's gradients)
    Tensor mine = flat.narrow(0, r * b.window, b.window);
    for (; next_piece < pieces_.size() && pieces_[next_piece].bucket == bi; ++next_piece) {
      const ShardPiece& piece = pieces_[next_piece];
      mine.narrow(0, piece.offset, piece.numel).copy_(piece.view);
    }
    pg_.label_next(str("DDP: parameters of bucket ", bi, " of ", buckets_.size()));
    pg_.allgather_into(flat, mine);
    for (size_t s = 0; s < b.params.size(); ++s) {
      Tensor dst = params_[b.params[s]].detach().view({-1});
      dst.copy_(flat.narrow(0, b.offsets[s], b.offsets[s + 1] - b.offsets[s]));
    }
  }
}

}  // namespace tr::distributed
