// DataLoader: batches of a Dataset in the order of a sampler, epoch by epoch, optionally
// assembled ahead by worker threads; can start an epoch at any batch (exact resume).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include "data/dataset.h"
#include "data/sampler.h"
#include "data/transforms.h"

namespace tr::data {

struct DataLoaderOptions {
  int64_t batch_size = 1;  // the global batch when world_size > 1
  bool shuffle = false;    // RandomSampler(seed): the order of epoch e depends only on (seed, e)
  bool drop_last = false;  // drop the last partial batch
  uint64_t seed = 0;
  // 0: batches are assembled in next(). >= 1: that many threads assemble batches ahead, at most
  // prefetch_factor * num_workers of them waiting; the batches are identical either way.
  int num_workers = 0;
  int prefetch_factor = 2;
  // Data parallelism: this loader yields rank's slice of each global batch of batch_size samples
  // (global_batch_slice), so R ranks together see the batches of one process, and every rank
  // has the same number of batches. batch_size must be divisible by world_size.
  int64_t world_size = 1;
  int64_t rank = 0;
  // A custom sampler replaces shuffle/seed (torch's sampler= argument); world_size must be 1
  // (give it a DistributedSampler for torch's per-rank sampling instead).
  std::shared_ptr<Sampler> sampler;
  // Random augmentations applied to each batch's input in order (the training set's; seeded by
  // `seed`, the epoch and each sample's dataset index).
  std::vector<std::shared_ptr<const Transform>> transforms;
};

struct Batch {
  // [B, ...] each; undefined when B is 0 (this rank's slice of a last global batch smaller
  // than world_size).
  Tensor input;
  Tensor target;
  int64_t epoch = 0;
  int64_t index = 0;             // batch number within the epoch
  int64_t global_size = 0;       // samples in the global batch over all ranks (B when world_size is 1)
  std::vector<int64_t> indices;  // the dataset indices of the B samples
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions opts);
  DataLoader(std::shared_ptr<const Dataset> dataset, int64_t batch_size, bool shuffle = false, bool drop_last = false,
             uint64_t seed = 0, int num_workers = 0);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t size() const;  // len(loader): batches per epoch
  const Dataset& dataset() const { return *dataset_; }
  const DataLoaderOptions& options() const { return opts_; }

  // Starts epoch `epoch` at batch `start_batch` (0 <= start_batch <= size()): the batches then
  // yielded are exactly batches start_batch.. of a full pass over that epoch.
  void begin_epoch(int64_t epoch, int64_t start_batch = 0);
  void set_epoch(int64_t epoch) { begin_epoch(epoch, 0); }
  // The next batch of the current epoch, or nullopt when the epoch is done. Before any
  // begin_epoch, the first call begins epoch 0. Rethrows a worker's error.
  std::optional<Batch> next();

  struct Position {
    int64_t epoch = 0;
    int64_t batch = 0;  // batches of the epoch already yielded (the index of the next one)
    bool operator==(const Position&) const = default;
  };
  // Where the loader stands; begin_epoch(p.epoch, p.batch) continues from exactly here.
  Position position() const { return {epoch_, next_batch_}; }
  bool epoch_done() const { return started_ && next_batch_ >= int64_t(plan_.size()); }

  // The index lists of this rank's batches of `epoch` (no data is read).
  std::vector<RankBatch> epoch_plan(int64_t epoch) const;
  // The dataset index of the first sample of global batch `batch` of `epoch` (the same on every
  // rank and world size: rank 0's first), or nullopt when the epoch has no such batch. Costs the
  // epoch's order unless this is rank 0 and the epoch under way.
  std::optional<int64_t> first_index(int64_t epoch, int64_t batch) const;

 private:
  Batch assemble(int64_t k) const;
  void start_workers();
  void stop_workers();
  void worker_loop();

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions opts_;
  std::shared_ptr<Sampler> sampler_;  // the default sequential / random one, or the user's
  bool started_ = false;
  int64_t epoch_ = 0;
  int64_t next_batch_ = 0;
  std::vector<RankBatch> plan_;

  // Prefetch state, guarded by mu_. Workers claim batches in order; next() takes them in order.
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };
  std::mutex mu_;
  std::condition_variable work_cv_, ready_cv_;
  std::vector<std::thread> workers_;
  int64_t next_claim_ = 0;
  std::map<int64_t, Slot> ready_;
  bool stop_ = false;
};

}  // namespace tr::data
