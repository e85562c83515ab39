// ProcessGroup: the collectives data-parallel training needs (torch.distributed's ProcessGroup):
// allreduce, broadcast, allgather, reduce-scatter and barrier, in place on contiguous tensors, each with a timeout.
// Backends: Gloo for CPU tensors (gloo_process_group.h), NCCL for CUDA tensors
// (nccl_process_group.h). Every rank must issue the same collectives in the same order, as in
// torch; the backends number them (the "tag") and a mismatch or a missing peer ends in an Error
// that names the collective and, where it can be told, the rank that did not arrive. Never a hang.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "core/registry.h"
#include "core/tensor.h"
#include "distributed/store.h"

namespace tr::distributed {

enum class ReduceOp { SUM, AVG, MAX, MIN };
const char* reduce_op_name(ReduceOp op);  // "sum", "avg", "max", "min"

// The handle of a collective that was queued (torch's Work). wait() blocks until it is done and
// rethrows its Error (every call, so several waiters all see it). The tensors it was given must
// stay alive and untouched until then.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool is_completed() = 0;
  // Orders the device work queued after this call behind the collective, without the host waiting
  // (what torch's ProcessGroupNCCL Work.wait() does): a GPU step then never stalls its host. A
  // host-memory group has nothing to order, so it waits. A failure or a hang surfaces at the next
  // wait() or host copy, or through the hang watchdog.
  virtual void synchronize_stream() { wait(); }
};

class ProcessGroup {
 public:
  ProcessGroup(int rank, int size, std::chrono::milliseconds timeout);
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Each collective must complete within this time once it starts running.
  std::chrono::milliseconds timeout() const { return timeout_; }
  virtual std::string backend() const = 0;  // "gloo" | "nccl"
  // The backend and how it moves data, for the run's first message, e.g. "gloo, allreduce
  // through shared memory".
  virtual std::string describe() const { return backend(); }
  // Where the tensors of this group's collectives live: host memory for gloo, the rank's GPU for nccl.
  virtual Device device() const { return kCPU; }

  // ---- asynchronous: queued in issue order, run one after another ----
  virtual std::shared_ptr<Work> allreduce_async(Tensor& t, ReduceOp op) = 0;
  // Several tensors of one dtype and device reduced as one flat buffer (one collective instead
  // of one per tensor; DDP's buckets). The results are copied back inside wait().
  virtual std::shared_ptr<Work> allreduce_coalesced_async(std::vector<Tensor>& ts, ReduceOp op);
  virtual std::shared_ptr<Work> broadcast_async(Tensor& t, int root) = 0;
  // out receives size() tensors shaped like t (out[r] is rank r's t), allocated here.
  virtual std::shared_ptr<Work> allgather_async(const Tensor& t, std::vector<Tensor>& out) = 0;
  virtual std::shared_ptr<Work> barrier_async() = 0;
  // torch's reduce_scatter_tensor: `input` holds size() * n elements, `output` n; rank r receives
  // the reduction over the ranks of input[r*n, (r+1)*n). `output` may be that window of `input`
  // (in place); `input`'s other elements are undefined afterwards. Each element is reduced as
  // allreduce reduces it, so the bits equal allreduce's. The default is an allreduce of `input`
  // and a copy; backends that can move less override it.
  virtual std::shared_ptr<Work> reduce_scatter_async(Tensor& output, Tensor& input, ReduceOp op);
  // torch's all_gather_into_tensor: `output` (size() * n elements) receives every rank's `input`
  // (n) in rank order. `input` may be rank()'s window of `output` (in place).
  virtual std::shared_ptr<Work> allgather_into_async(Tensor& output, const Tensor& input);

  // ---- blocking: the async op, then wait(); ordered with the async ones ----
  void allreduce(Tensor& t, ReduceOp op = ReduceOp::SUM) { allreduce_async(t, op)->wait(); }
  void allreduce_coalesced(std::vector<Tensor>& ts, ReduceOp op = ReduceOp::SUM) {
    allreduce_coalesced_async(ts, op)->wait();
  }
  void broadcast(Tensor& t, int root = 0) { broadcast_async(t, root)->wait(); }
  std::vector<Tensor> allgather(const Tensor& t);
  void barrier() { barrier_async()->wait(); }
  void reduce_scatter(Tensor& output, Tensor& input, ReduceOp op = ReduceOp::SUM) {
    reduce_scatter_async(output, input, op)->wait();
  }
  void allgather_into(Tensor& output, const Tensor& input) { allgather_into_async(output, input)->wait(); }
  // Host numbers (flags, sums, figures) reduced over the ranks in place, as one f64 tensor on the
  // group's device; `label` names the collective in errors and in activity().
  void allreduce_values(std::vector<double>& values, ReduceOp op, std::string label);

  // A label for the next collective this thread issues ("DDP bucket 2 of 3"), added to its name in
  // errors and in activity().
  void label_next(std::string label) { next_label_ = std::move(label); }
  // What the group is doing now, for the hang watchdog: the running collective's name and for how
  // long, and how many are queued behind it; "" when none runs. Safe from any thread.
  virtual std::string activity() const { return ""; }
  // Where this rank is in the group's sequence of collectives, for the hang watchdog: the tag of
  // the last collective it issued and the oldest one it issued that has not completed (tag 0:
  // none). Compared across the ranks, they name the rank that never issued the collective the
  // others wait in. A group that does not track them returns issued = 0.
  struct CollectiveProgress {
    uint64_t issued = 0;
    uint64_t pending_tag = 0;
    std::string pending;  // that collective's name, e.g. "allreduce (sum) of 4.0 KiB f32, DDP bucket 0 of 1"
  };
  virtual CollectiveProgress collective_progress() const { return {}; }
  // Ends the group's communication now, from any thread (torch's ProcessGroup::abort): the hang
  // watchdog calls it before the process exits. NCCL aborts its communicator, so that no kernel
  // keeps waiting for a peer on the GPU and no teardown waits for one; every later collective or
  // wait fails with `reason`. Gloo has nothing to end that the process's exit does not close.
  virtual void abort(const std::string& reason) { (void)reason; }

 protected:
  // Common argument checks; `what` names the collective in the message.
  void check_tensor(const Tensor& t, const char* what, DeviceType expected) const;
  void check_root(int root, const char* what) const;
  // reduce_scatter's and allgather_into's: contiguous, one dtype and device, whole = size() * part.
  void check_scatter_gather(const Tensor& whole, const Tensor& part, const char* what, DeviceType expected) const;
  // allreduce's checks on top of check_tensor: avg needs a floating tensor, bool takes max/min.
  void check_allreduce(const Tensor& t, ReduceOp op, DeviceType expected) const;

  // ", <label>" for the collective being issued (then cleared), "" without one
  std::string take_label() {
    std::string l = next_label_.empty() ? "" : ", " + next_label_;
    next_label_.clear();
    return l;
  }

  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::string next_label_;
};

struct ProcessGroupOptions {
  std::string backend = "auto";  // "gloo" | "nccl" | "auto" (nccl when a GPU is usable, else gloo)
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // Namespaces this group's keys in the store: two groups (or two restarts) need two prefixes.
  std::string prefix = "pg";
  std::string hostname = "127.0.0.1";  // gloo: the address this rank binds and peers connect to
  int node = -1;                       // this rank's node, exchanged so that errors name a peer's
  int cuda_device = -1;                // nccl: the GPU this rank drives; -1: rank % device count
};

// Builds the backend and runs its rendezvous through `store` (blocking until every rank has
// joined, or an Error naming the ranks that did not within the timeout). The store must outlive
// the group and be usable from the group's threads (they record which collective a rank is
// waiting in, so that a timeout can name the rank that is missing).
// A process group backend: Registry<ProcessGroupBackend>, keyed by [dist] backend. Gloo registers
// in gloo_process_group.cpp; NCCL in nccl/nccl_process_group.cpp, or nccl_stub/ in a build without
// CUDA (whose "nccl" says so).
struct ProcessGroupBackend {
  std::unique_ptr<ProcessGroup> (*create)(Store& store, const ProcessGroupOptions& opts) = nullptr;

  static constexpr const char* kRegistryKind = "process group backend";
};

// opts.backend from the registry; "auto": nccl when a GPU is usable, else gloo.
std::unique_ptr<ProcessGroup> make_process_group(Store& store, const ProcessGroupOptions& opts);
std::unique_ptr<ProcessGroup> make_process_group(const std::string& backend, Store& store, int rank, int size,
                                                 std::chrono::milliseconds timeout, const std::string& prefix);

// The first step of every backend's rendezvous: records "<key_prefix>/<rank>" = value, then waits
// for every rank's record. After `timeout`, an Error "<where>: timed out after N ms ...: rank 2
// never joined" names the ranks whose record is missing. Returns the values, indexed by rank.
std::vector<Bytes> join_ranks(Store& store, const std::string& key_prefix, int rank, int size,
                              std::chrono::milliseconds timeout, const std::string& where, const Bytes& value = {});

// Which rank is missing from a collective. A rank whose collective is still running after
// announce_delay() records "<prefix>/arrived/<tag>/<rank>" in the store (one store write for slow
// collectives only; fast ones cost nothing). When a collective fails, missing_ranks() waits a
// little for the others' records: a rank without one never reached that collective (it exited,
// crashed or is stuck elsewhere). Store errors are swallowed: this only improves a message.
class ArrivalLog {
 public:
  ArrivalLog(Store& store, std::string prefix, int rank, int size, std::chrono::milliseconds timeout);
  std::chrono::milliseconds announce_delay() const { return delay_; }
  void announce(uint64_t tag);
  // Ranks (other than this one) without a record for `tag` after waiting up to delay + margin.
  // Empty when all arrived, or when the store could not be asked (then `ok` is false).
  std::vector<int> missing_ranks(uint64_t tag, bool* ok = nullptr);
  // A sentence for an error message: "rank 2 never reached it (...)" or "every rank reached it".
  std::string describe(uint64_t tag);

 private:
  std::string key(uint64_t tag, int rank) const;
  Store& store_;
  std::string prefix_;
  int rank_, size_;
  std::chrono::milliseconds delay_;
};

}  // namespace tr::distributed
