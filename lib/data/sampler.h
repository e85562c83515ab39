// Samplers (torch.utils.data.{Sequential,Random,Distributed}Sampler) and the world-size-independent
// split of global batches across ranks. An epoch's order is a pure function of (seed, epoch).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tr::data {

// randperm(n) from a Generator seeded with seed + epoch (torch's DistributedSampler recipe):
// the same on every run, thread count and world size.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual int64_t size() const = 0;                  // len(sampler)
  virtual std::vector<int64_t> indices() const = 0;  // list(iter(sampler)) for the current epoch
  // Selects the epoch whose order indices() returns (torch has it on DistributedSampler only;
  // here every sampler takes it, so that an epoch's order never depends on how many came before).
  virtual void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  virtual std::string describe() const = 0;

 protected:
  int64_t epoch_ = 0;
};

// 0, 1, ..., n-1 every epoch.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t n);
  int64_t size() const override { return n_; }
  std::vector<int64_t> indices() const override;
  std::string describe() const override;

 private:
  int64_t n_;
};

// A permutation of 0..n-1 drawn from (seed, epoch): epoch_permutation(n, seed, epoch).
class RandomSampler : public Sampler {
 public:
  RandomSampler(int64_t n, uint64_t seed);
  int64_t size() const override { return n_; }
  std::vector<int64_t> indices() const override;
  std::string describe() const override;

 private:
  int64_t n_;
  uint64_t seed_;
};

// torch.utils.data.distributed.DistributedSampler. The epoch's order (the permutation when
// shuffling, else 0..n-1) is made evenly divisible by num_replicas: without drop_last by
// appending its head again (repeated whole if the padding exceeds n), with drop_last by cutting
// the tail. Rank r takes positions r, r + R, r + 2R, ... of that list:
//   num_samples = drop_last && n % R ? ceil((n - R) / R) : ceil(n / R);   total = num_samples * R.
class DistributedSampler : public Sampler {
 public:
  DistributedSampler(int64_t n, int64_t num_replicas, int64_t rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  int64_t size() const override { return num_samples_; }  // this rank's count
  std::vector<int64_t> indices() const override;
  std::string describe() const override;
  int64_t total_size() const { return num_samples_ * num_replicas_; }

 private:
  int64_t n_, num_replicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t num_samples_;
};

// Number of global batches an epoch of n samples makes.
int64_t num_global_batches(int64_t n, int64_t global_batch, bool drop_last);

// One rank's share of one global batch.
struct RankBatch {
  std::vector<int64_t> indices;  // this rank's samples, in global order
  int64_t global_size = 0;       // samples in the whole global batch (all ranks)
  int64_t global_offset = 0;     // position of indices[0] within the global batch
};

// Data parallelism that does not change the math: the global order is cut into global batches of
// `global_batch` (the last one partial unless drop_last), and rank r of R takes the contiguous
// slice [r * G / R, (r + 1) * G / R) of each, so the ranks of R x (G / R) together see exactly
// the samples of 1 x G, batch by batch. global_batch must be divisible by world_size. A partial
// last batch of g < G samples is split as evenly as possible (the first g % R ranks take one more),
// so a rank may get an empty slice when g < R: weight a rank's mean loss by
// indices.size() / global_size (and sum across ranks) to match 1 x G exactly.
RankBatch global_batch_slice(const std::vector<int64_t>& global_order, int64_t batch, int64_t global_batch,
                             int64_t world_size, int64_t rank, bool drop_last);
// All of this rank's batches for the epoch (global_batch_slice for batch = 0, 1, ...).
std::vector<RankBatch> shard_global_batches(const std::vector<int64_t>& global_order, int64_t global_batch,
                                            int64_t world_size, int64_t rank, bool drop_last);

}  // namespace tr::data
