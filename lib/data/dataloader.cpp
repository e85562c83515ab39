// DataLoader: the epoch plan (sampler order cut into batches / rank slices) and the prefetch threads.
#include "data/dataloader.h"
#include <algorithm>

namespace tr::data {

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions opts)
    : dataset_(std::move(dataset)), opts_(std::move(opts)) {
  TR_CHECK(dataset_ != nullptr, "DataLoader: null dataset");
  TR_CHECK(opts_.batch_size >= 1,
           "DataLoader: batch_size should be a positive integer value, but got batch_size=", opts_.batch_size);
  TR_CHECK(opts_.num_workers >= 0, "DataLoader: num_workers option should be non-negative, got ", opts_.num_workers);
  TR_CHECK(opts_.prefetch_factor >= 1, "DataLoader: prefetch_factor must be >= 1, got ", opts_.prefetch_factor);
  TR_CHECK(opts_.world_size >= 1 && opts_.rank >= 0 && opts_.rank < opts_.world_size, "DataLoader: rank ", opts_.rank,
           " is not in [0, world_size = ", opts_.world_size, ")");
  TR_CHECK(opts_.batch_size % opts_.world_size == 0, "DataLoader: the global batch_size ", opts_.batch_size,
           " must be divisible by the world size ", opts_.world_size);
  if (opts_.sampler) {
    TR_CHECK(!opts_.shuffle, "DataLoader: sampler option is mutually exclusive with shuffle");
    TR_CHECK(opts_.world_size == 1, "DataLoader: a custom sampler needs world_size 1 (got ", opts_.world_size,
             "); the loader's own global-batch split handles data parallelism");
    sampler_ = opts_.sampler;
  } else if (opts_.shuffle) {
    sampler_ = std::make_shared<RandomSampler>(dataset_->size(), opts_.seed);
  } else {
    sampler_ = std::make_shared<SequentialSampler>(dataset_->size());
  }
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, int64_t batch_size, bool shuffle, bool drop_last,
                       uint64_t seed, int num_workers)
    : DataLoader(std::move(dataset), [&] {
        DataLoaderOptions o;
        o.batch_size = batch_size;
        o.shuffle = shuffle;
        o.drop_last = drop_last;
        o.seed = seed;
        o.num_workers = num_workers;
        return o;
      }()) {}

DataLoader::~DataLoader() { stop_workers(); }

int64_t DataLoader::size() const { return num_global_batches(sampler_->size(), opts_.batch_size, opts_.drop_last); }

std::vector<RankBatch> DataLoader::epoch_plan(int64_t epoch) const {
  // set_epoch on a shared sampler is the only mutation; the order is a function of (seed, epoch).
  sampler_->set_epoch(epoch);
  return shard_global_batches(sampler_->indices(), opts_.batch_size, opts_.world_size, opts_.rank, opts_.drop_last);
}

std::optional<int64_t> DataLoader::first_index(int64_t epoch, int64_t batch) const {
  if (batch < 0 || batch >= size()) return std::nullopt;
  // rank 0's slice of a global batch starts it, and is never empty
  if (started_ && epoch == epoch_ && opts_.rank == 0) return plan_[size_t(batch)].indices.front();
  sampler_->set_epoch(epoch);
  return sampler_->indices()[size_t(batch * opts_.batch_size)];
}

void DataLoader::begin_epoch(int64_t epoch, int64_t start_batch) {
  TR_CHECK(epoch >= 0, "DataLoader: epoch must be >= 0, got ", epoch);
  stop_workers();
  std::vector<RankBatch> plan = epoch_plan(epoch);
  TR_CHECK(start_batch >= 0 && start_batch <= int64_t(plan.size()), "DataLoader: start_batch ", start_batch,
           " is out of range: epoch ", epoch, " has ", plan.size(), " batches of ", opts_.batch_size, " from ",
           dataset_->describe());
  plan_ = std::move(plan);
  epoch_ = epoch;
  next_batch_ = start_batch;
  started_ = true;
  if (opts_.num_workers > 0) start_workers();
}

Batch DataLoader::assemble(int64_t k) const {
  const RankBatch& rb = plan_[size_t(k)];
  Batch b;
  b.epoch = epoch_;
  b.index = k;
  b.global_size = rb.global_size;
  b.indices = rb.indices;
  if (!rb.indices.empty()) {
    Example e = dataset_->get_batch(rb.indices);
    b.input = opts_.transforms.empty()
                  ? std::move(e.input)
                  : apply_transforms(opts_.transforms, std::move(e.input), rb.indices, epoch_, opts_.seed);
    b.target = std::move(e.target);
  }
  return b;
}

std::optional<Batch> DataLoader::next() {
  if (!started_) begin_epoch(0, 0);
  if (next_batch_ >= int64_t(plan_.size())) return std::nullopt;
  const int64_t k = next_batch_;
  if (workers_.empty()) {
    Batch b = assemble(k);
    ++next_batch_;
    return b;
  }
  Slot slot;
  {
    std::unique_lock<std::mutex> lk(mu_);
    ready_cv_.wait(lk, [&] { return ready_.count(k) > 0; });
    auto it = ready_.find(k);
    slot = std::move(it->second);
    ready_.erase(it);
    ++next_batch_;  // frees one place in the prefetch window
  }
  work_cv_.notify_all();
  if (slot.error) std::rethrow_exception(slot.error);
  return std::move(slot.batch);
}

void DataLoader::start_workers() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = false;
    next_claim_ = next_batch_;
    ready_.clear();
  }
  const int64_t remaining = int64_t(plan_.size()) - next_batch_;
  const int n = int(std::min<int64_t>(opts_.num_workers, remaining));
  for (int w = 0; w < n; ++w) workers_.emplace_back([this] { worker_loop(); });
}

void DataLoader::stop_workers() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  std::lock_guard<std::mutex> lk(mu_);
  ready_.clear();
}

// Claims the next unclaimed batch while fewer than prefetch_factor * num_workers are ahead of the
// consumer, assembles it outside the lock, and files it under its index.
void DataLoader::worker_loop() {
  const int64_t window = int64_t(opts_.prefetch_factor) * opts_.num_workers;
  const int64_t end = int64_t(plan_.size());
  for (;;) {
    int64_t k;
    {
      std::unique_lock<std::mutex> lk(mu_);
      work_cv_.wait(lk, [&] { return stop_ || next_claim_ >= end || next_claim_ < next_batch_ + window; });
      if (stop_ || next_claim_ >= end) return;
      k = next_claim_++;
    }
    Slot slot;
    try {
      slot.batch = assemble(k);
    } catch (...) { slot.error = std::current_exception(); }
    {
      std::lock_guard<std::mutex> lk(mu_);
      ready_[k] = std::move(slot);
    }
    ready_cv_.notify_all();
  }
}

}  // namespace tr::data
