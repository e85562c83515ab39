// Sequential, random and distributed samplers; global-batch sharding across ranks.
#include "data/sampler.h"
#include <algorithm>
#include "core/error.h"
#include "core/rng.h"
#include "ops/ops.h"

namespace tr::data {

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  TR_CHECK(n >= 0, "epoch_permutation: n must be >= 0, got ", n);
  Generator g(seed + uint64_t(epoch));  // g.manual_seed(self.seed + self.epoch)
  Tensor p = randperm(n, &g);
  const int64_t* d = p.data_ptr<int64_t>();
  return std::vector<int64_t>(d, d + n);
}

SequentialSampler::SequentialSampler(int64_t n) : n_(n) {
  TR_CHECK(n >= 0, "SequentialSampler: dataset size must be >= 0, got ", n);
}
std::vector<int64_t> SequentialSampler::indices() const {
  std::vector<int64_t> v(static_cast<size_t>(n_));
  for (int64_t i = 0; i < n_; ++i) v[size_t(i)] = i;
  return v;
}
std::string SequentialSampler::describe() const { return str("SequentialSampler(", n_, ")"); }

RandomSampler::RandomSampler(int64_t n, uint64_t seed) : n_(n), seed_(seed) {
  TR_CHECK(n >= 0, "RandomSampler: dataset size must be >= 0, got ", n);
}
std::vector<int64_t> RandomSampler::indices() const { return epoch_permutation(n_, seed_, epoch_); }
std::string RandomSampler::describe() const { return str("RandomSampler(", n_, ", seed=", seed_, ")"); }

DistributedSampler::DistributedSampler(int64_t n, int64_t num_replicas, int64_t rank, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : n_(n), num_replicas_(num_replicas), rank_(rank), shuffle_(shuffle), seed_(seed), drop_last_(drop_last) {
  TR_CHECK(n >= 0, "DistributedSampler: dataset size must be >= 0, got ", n);
  TR_CHECK(num_replicas >= 1, "DistributedSampler: num_replicas must be >= 1, got ", num_replicas);
  TR_CHECK(rank >= 0 && rank < num_replicas, "DistributedSampler: Invalid rank ", rank,
           ", rank should be in the interval [0, ", num_replicas - 1, "]");
  const int64_t R = num_replicas;
  if (drop_last && n % R != 0)
    num_samples_ = std::max<int64_t>((n - R + R - 1) / R, 0);  // ceil((n - R) / R)
  else
    num_samples_ = (n + R - 1) / R;  // ceil(n / R)
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> order = shuffle_ ? epoch_permutation(n_, seed_, epoch_) : SequentialSampler(n_).indices();
  const int64_t total = total_size();
  if (!drop_last_) {
    // Pad with the head of the order, repeated as often as needed.
    const int64_t n = int64_t(order.size());
    for (int64_t k = 0; int64_t(order.size()) < total && n > 0; ++k) order.push_back(order[size_t(k % n)]);
  } else {
    order.resize(size_t(total));
  }
  TR_CHECK(int64_t(order.size()) == total, "DistributedSampler: internal error: ", order.size(), " indices, expected ",
           total);
  std::vector<int64_t> mine;
  mine.reserve(size_t(num_samples_));
  for (int64_t k = rank_; k < total; k += num_replicas_) mine.push_back(order[size_t(k)]);
  return mine;
}

std::string DistributedSampler::describe() const {
  return str("DistributedSampler(", n_, ", num_replicas=", num_replicas_, ", rank=", rank_,
             ", shuffle=", shuffle_ ? "true" : "false", ", seed=", seed_, ", drop_last=", drop_last_ ? "true" : "false",
             ")");
}

int64_t num_global_batches(int64_t n, int64_t global_batch, bool drop_last) {
  TR_CHECK(global_batch >= 1, "batch_size must be >= 1, got ", global_batch);
  return drop_last ? n / global_batch : (n + global_batch - 1) / global_batch;
}

RankBatch global_batch_slice(const std::vector<int64_t>& global_order, int64_t batch, int64_t global_batch,
                             int64_t world_size, int64_t rank, bool drop_last) {
  TR_CHECK(world_size >= 1, "global batches: world_size must be >= 1, got ", world_size);
  TR_CHECK(rank >= 0 && rank < world_size, "global batches: rank ", rank, " is not in [0, ", world_size - 1, "]");
  TR_CHECK(global_batch >= 1 && global_batch % world_size == 0, "global batches: the global batch_size ", global_batch,
           " must be a positive multiple of the world size ", world_size, " (", world_size, " ranks x per-rank batch)");
  const int64_t n = int64_t(global_order.size());
  const int64_t nb = num_global_batches(n, global_batch, drop_last);
  TR_CHECK(batch >= 0 && batch < nb, "global batches: batch ", batch, " is out of range: the epoch has ", nb,
           " batches of ", global_batch, " from ", n, " samples", drop_last ? " (drop_last)" : "");
  const int64_t start = batch * global_batch;
  const int64_t g = std::min(global_batch, n - start);
  const int64_t base = g / world_size, extra = g % world_size;
  const int64_t count = base + (rank < extra ? 1 : 0);
  const int64_t offset = rank * base + std::min(rank, extra);
  RankBatch rb;
  rb.global_size = g;
  rb.global_offset = offset;
  rb.indices.assign(global_order.begin() + start + offset, global_order.begin() + start + offset + count);
  return rb;
}

std::vector<RankBatch> shard_global_batches(const std::vector<int64_t>& global_order, int64_t global_batch,
                                            int64_t world_size, int64_t rank, bool drop_last) {
  const int64_t nb = num_global_batches(int64_t(global_order.size()), global_batch, drop_last);
  std::vector<RankBatch> out;
  out.reserve(size_t(nb));
  for (int64_t b = 0; b < nb; ++b)
    out.push_back(global_batch_slice(global_order, b, global_batch, world_size, rank, drop_last));
  return out;
}

}  // namespace tr::data
