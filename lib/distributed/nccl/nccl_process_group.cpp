// NCCL backend: rank 0's unique id travels in its rendezvous record; a non-blocking communicator,
// so that init, every enqueue and every wait can be polled against the deadline and the
// communicator aborted when one passes (a blocking NCCL call would hang on a dead peer). The hang
// watchdog aborts it too (abort()), from its own thread, when the training thread is stuck at a
// stream sync behind a collective that a peer never joined.
#include "distributed/nccl_process_group.h"
#include "core/format_bytes.h"
#include <cuda_runtime.h>
#include <nccl.h>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include "core/grad_mode.h"
#include "core/cuda_hooks.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"
#include "distributed/nccl/in_flight.h"
#include "ops/factories.h"

namespace tr::distributed {

using cuda::DeviceGuard;  // NCCL calls and event records act on the current device

namespace {

using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

int64_t ms_since(Clock::time_point t0) { return std::chrono::duration_cast<ms>(Clock::now() - t0).count(); }

std::string nccl_error(ncclComm_t comm, ncclResult_t r) {
  std::string s = ncclGetErrorString(r);
  const char* last = comm ? ncclGetLastError(comm) : nullptr;
  if (last && *last) s += str(" (", last, ")");
  return s;
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    case DType::I64: return ncclInt64;
    case DType::I32: return ncclInt32;
    case DType::U8:
    case DType::Bool: return ncclUint8;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return ncclSum;
    case ReduceOp::AVG: return ncclAvg;
    case ReduceOp::MAX: return ncclMax;
    case ReduceOp::MIN: return ncclMin;
  }
  return ncclSum;
}

// Polls a non-blocking communicator until its last call is no longer in progress; returns that
// state, or ncclInProgress when the deadline passed first.
ncclResult_t settle(ncclComm_t comm, Clock::time_point deadline) {
  while (true) {
    ncclResult_t st = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &st);
    if (r != ncclSuccess) return r;
    if (st != ncclInProgress) return st;
    if (Clock::now() >= deadline) return ncclInProgress;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace

struct NcclProcessGroup::Impl {
  Impl(Store& store, const ProcessGroupOptions& o);
  ~Impl();

  // Enqueues `call` on the group's stream after the default stream's pending work; returns the
  // Work that waits for it. `keep` holds the tensors alive until then.
  std::shared_ptr<Work> enqueue(std::string name, std::vector<Tensor> keep,
                                const std::function<ncclResult_t(ncclComm_t, cudaStream_t)>& call);
  // Aborts the communicator (every later collective fails with `msg`). Caller holds mu.
  void abort_locked(const std::string& msg);
  // The test hook TR_TEST_STALL_COLLECTIVE: blocks before collective `tag` until the group is aborted.
  void stall_for_test(uint64_t tag, std::unique_lock<std::timed_mutex>& l);
  std::string failure(const std::string& name, uint64_t tag, const std::string& why, bool timed_out,
                      Clock::time_point t0);

  Store& store;
  const std::string prefix;
  const int rank, size;
  const ms timeout;
  int device = 0;
  ArrivalLog log;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  Tensor barrier_buf;
  // enqueue order = tag order; abort. Timed: the watchdog's abort must not wait for long on a
  // training thread that holds it in an NCCL call.
  std::timed_mutex mu;
  std::condition_variable_any aborted;  // wakes a stalled enqueue (the test hook)
  uint64_t next_tag = 1;
  std::atomic<uint64_t> issued{0};  // the tag of the last collective handed to NCCL
  std::string broken;
  std::unique_ptr<InFlightCollectives> in_flight;
};

namespace {

class NcclWork : public Work {
 public:
  NcclWork(NcclProcessGroup::Impl* im, std::string name, uint64_t tag, std::shared_ptr<DoneEvent> done,
           std::vector<Tensor> keep)
      : im_(im),
        name_(std::move(name)),
        tag_(tag),
        done_(std::move(done)),
        start_(Clock::now()),
        keep_(std::move(keep)) {}
  ~NcclWork() override {
    // Unwaited: the buffers must not go back to the allocator while NCCL may still use them.
    try {
      if (!completed_) wait();
    } catch (...) {}
  }

  void wait() override {
    std::lock_guard<std::mutex> g(mu_);
    if (!completed_) poll();
    if (err_) std::rethrow_exception(err_);
  }
  bool is_completed() override {
    std::lock_guard<std::mutex> g(mu_);
    return completed_ || cudaEventQuery(done_->event) == cudaSuccess;
  }
  // the device's default stream waits for the collective's event; the host goes on
  void synchronize_stream() override {
    std::lock_guard<std::mutex> g(mu_);
    if (completed_) {
      if (err_) std::rethrow_exception(err_);
      return;
    }
    DeviceGuard dg(im_->device);
    TR_CUDA_CHECK(cudaStreamWaitEvent(nullptr, done_->event, 0));
  }

 private:
  void poll() {
    bool announced = false;
    const auto deadline = start_ + im_->timeout;
    try {
      while (true) {
        ncclResult_t st = ncclSuccess;
        {
          // the communicator may be aborted meanwhile: then its collectives end on the GPU, their
          // events complete, and their outputs are undefined, so this is checked first
          std::lock_guard<std::timed_mutex> g(im_->mu);
          if (!im_->broken.empty()) {
            err_ = std::make_exception_ptr(
                Error(str("nccl ", name_, " did not complete: an earlier collective failed: ", im_->broken)));
            completed_ = true;
            keep_.clear();
            return;
          }
          ncclCommGetAsyncError(im_->comm, &st);
        }
        cudaError_t e = cudaEventQuery(done_->event);
        if (e == cudaSuccess) break;
        if (e != cudaErrorNotReady) {
          cudaGetLastError();
          finish_error(str("the CUDA stream failed: ", cudaGetErrorString(e)), false);
          return;
        }
        if (st != ncclSuccess && st != ncclInProgress) {
          finish_error(nccl_error(im_->comm, st), false);
          return;
        }
        const auto now = Clock::now();
        if (!announced && now - start_ >= im_->log.announce_delay()) {
          im_->log.announce(tag_);
          announced = true;
        }
        if (now >= deadline) {
          finish_error("", true);
          return;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      completed_ = true;
      im_->in_flight->completed_through(tag_);
    } catch (const std::exception& e) {
      err_ = std::make_exception_ptr(Error(str("nccl ", name_, ": ", e.what())));
      completed_ = true;
    }
    keep_.clear();
  }

  void finish_error(const std::string& why, bool timed_out) {
    im_->log.announce(tag_);
    std::string msg = im_->failure(name_, tag_, why, timed_out, start_);
    {
      std::lock_guard<std::timed_mutex> g(im_->mu);
      im_->abort_locked(msg);
    }
    err_ = std::make_exception_ptr(Error(msg));
    completed_ = true;
    keep_.clear();
  }

  NcclProcessGroup::Impl* im_;
  std::string name_;
  uint64_t tag_;
  std::shared_ptr<DoneEvent> done_;
  Clock::time_point start_;
  std::vector<Tensor> keep_;
  std::mutex mu_;
  bool completed_ = false;
  std::exception_ptr err_;
};

}  // namespace

NcclProcessGroup::Impl::Impl(Store& s, const ProcessGroupOptions& o)
    : store(s),
      prefix(o.prefix + "/nccl"),
      rank(o.rank),
      size(o.size),
      timeout(o.timeout),
      log(s, o.prefix + "/nccl", o.rank, o.size, o.timeout) {
  const auto t0 = Clock::now();
  const int count = cuda::device_count();
  TR_CHECK(count > 0, "nccl process group: no usable GPU (", cuda::unavailable_reason(), ")");
  device = o.cuda_device >= 0 ? o.cuda_device : rank % count;
  TR_CHECK(device < count, "nccl process group: cuda:", device, " does not exist (", count, " devices)");
  const std::string where =
      str("nccl rendezvous (store prefix '", o.prefix, "', rank ", rank, " of ", size, ", cuda:", device, ")");
  // Rank 0's unique id rides in its join record: one store round names missing ranks and
  // delivers the id.
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  Bytes mine;
  if (rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    TR_CHECK(r == ncclSuccess, where, ": ncclGetUniqueId failed: ", ncclGetErrorString(r));
    const auto* p = reinterpret_cast<const uint8_t*>(&id);
    mine.assign(p, p + sizeof id);
  }
  std::vector<Bytes> joined = join_ranks(store, prefix + "/joined", rank, size, timeout, where, mine);
  TR_CHECK(joined[0].size() == sizeof id, where, ": rank 0's record holds ", joined[0].size(),
           " bytes, not an ncclUniqueId (", sizeof id, " bytes)");
  std::memcpy(&id, joined[0].data(), sizeof id);

  DeviceGuard g(device);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, rank, &cfg);
  if (r == ncclInProgress || r == ncclSuccess) r = settle(comm, t0 + timeout);
  if (r != ncclSuccess) {
    const std::string why = r == ncclInProgress ? str("did not complete within ", timeout.count(), " ms")
                                                : str("failed: ", nccl_error(comm, r));
    if (comm) ncclCommAbort(comm);
    comm = nullptr;
    throw Error(str(where, ": ncclCommInitRank ", why));
  }
  TR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  in_flight = std::make_unique<InFlightCollectives>(device);
  NoGradGuard ng;
  barrier_buf = zeros({1}, TensorOptions(DType::F32).device(Device(DeviceType::CUDA, device)));
}

NcclProcessGroup::Impl::~Impl() {
  try {
    if (comm) {
      DeviceGuard g(device);
      bool clean = broken.empty() && ncclCommFinalize(comm) == ncclSuccess;
      if (clean) clean = settle(comm, Clock::now() + timeout) == ncclSuccess;
      if (clean)
        ncclCommDestroy(comm);
      else
        ncclCommAbort(comm);
    }
    if (stream) cudaStreamDestroy(stream);
    in_flight.reset();
    barrier_buf = Tensor();
  } catch (...) {}
}

void NcclProcessGroup::Impl::abort_locked(const std::string& msg) {
  if (!broken.empty()) return;
  broken = msg;
  if (comm) {
    DeviceGuard g(device);
    ncclCommAbort(comm);  // never ncclCommDestroy: it would wait for the hung collective
    comm = nullptr;
  }
  aborted.notify_all();
}

// TR_TEST_STALL_COLLECTIVE=<rank>:<tag> (the Gloo group's hook, read here too): that rank never
// issues collective <tag>; its host stops before it until the group is aborted, as a rank stuck
// outside a collective that its peers wait in on their GPUs: the NCCL hang tests. Nothing else reads it.
void NcclProcessGroup::Impl::stall_for_test(uint64_t tag, std::unique_lock<std::timed_mutex>& l) {
  static const std::string spec = [] {
    const char* v = std::getenv("TR_TEST_STALL_COLLECTIVE");
    return std::string(v ? v : "");
  }();
  if (spec.empty() || spec != str(rank, ":", tag)) return;
  std::fprintf(stderr, "rank %d: TR_TEST_STALL_COLLECTIVE: stalling before nccl collective tag %llu\n", rank,
               static_cast<unsigned long long>(tag));
  aborted.wait(l, [&] { return !broken.empty(); });
}

std::string NcclProcessGroup::Impl::failure(const std::string& name, uint64_t tag, const std::string& why,
                                            bool timed_out, Clock::time_point t0) {
  return str("nccl ", name, timed_out ? " timed out" : " failed", " on rank ", rank, " of ", size, " after ",
             ms_since(t0), " ms (timeout ", timeout.count(), " ms): ", timed_out ? log.describe(tag) : why);
}

std::shared_ptr<Work> NcclProcessGroup::Impl::enqueue(
    std::string name, std::vector<Tensor> keep, const std::function<ncclResult_t(ncclComm_t, cudaStream_t)>& call) {
  std::unique_lock<std::timed_mutex> g(mu);
  stall_for_test(next_tag, g);
  const uint64_t tag = next_tag++;
  const std::string label = name;
  name = str(name, " (tag ", tag, ")");
  TR_CHECK(broken.empty(), "nccl ", name, " was not run: an earlier collective failed: ", broken);
  DeviceGuard dg(device);
  // The inputs were written by kernels on the legacy default stream: start after them.
  cudaEvent_t ready = nullptr;
  TR_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  TR_CUDA_CHECK(cudaEventRecord(ready, cudaStreamLegacy));
  TR_CUDA_CHECK(cudaStreamWaitEvent(stream, ready, 0));
  cudaEventDestroy(ready);  // released once the wait has happened
  const auto t0 = Clock::now();
  ncclResult_t r = call(comm, stream);
  if (r == ncclInProgress) r = settle(comm, t0 + timeout);
  if (r != ncclSuccess) {
    const std::string msg = failure(name, tag, r == ncclInProgress ? "" : nccl_error(comm, r), r == ncclInProgress, t0);
    abort_locked(msg);
    throw Error(msg);
  }
  issued = tag;
  auto done = std::make_shared<DoneEvent>();
  TR_CUDA_CHECK(cudaEventRecord(done->event, stream));
  in_flight->add(tag, label, done);
  return std::make_shared<NcclWork>(this, std::move(name), tag, std::move(done), std::move(keep));
}

// ---- the group ----

NcclProcessGroup::NcclProcessGroup(Store& store, const ProcessGroupOptions& opts)
    : ProcessGroup(opts.rank, opts.size, opts.timeout), impl_(std::make_unique<Impl>(store, opts)) {}

NcclProcessGroup::~NcclProcessGroup() = default;

Device NcclProcessGroup::device() const { return Device(DeviceType::CUDA, impl_->device); }

std::string NcclProcessGroup::activity() const {
  const InFlightCollectives::Oldest o = impl_->in_flight->oldest();
  if (o.tag == 0) return "";
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", o.seconds);
  return str("nccl ", o.name, " (tag ", o.tag, "), issued ", secs, " s ago and not complete on the GPU",
             o.behind ? str(", ", o.behind, " issued behind it") : "");
}

ProcessGroup::CollectiveProgress NcclProcessGroup::collective_progress() const {
  const InFlightCollectives::Oldest o = impl_->in_flight->oldest();
  return {impl_->issued.load(), o.tag, o.name};
}

void NcclProcessGroup::abort(const std::string& reason) {
  // Bounded: a training thread inside an NCCL call holds the lock at most until its own timeout;
  // the process exits anyway, and the driver then ends what the communicator left on the GPU.
  std::unique_lock<std::timed_mutex> l(impl_->mu, std::chrono::seconds(2));
  if (!l.owns_lock()) {
    std::fprintf(stderr, "rank %d: the nccl communicator is busy in an NCCL call; not aborted\n", rank_);
    return;
  }
  const bool had = impl_->comm != nullptr;
  impl_->abort_locked(str("nccl: the process group was aborted: ", reason));
  if (had) std::fprintf(stderr, "rank %d: aborted the nccl communicator (ncclCommAbort)\n", rank_);
}

std::shared_ptr<Work> NcclProcessGroup::allreduce_async(Tensor& t, ReduceOp op) {
  check_allreduce(t, op, DeviceType::CUDA);
  TR_CHECK(t.device().index == impl_->device, "nccl allreduce: the tensor is on ", t.device().str(),
           ", this rank's group drives cuda:", impl_->device);
  const DType dt = t.dtype();
  const size_t n = size_t(t.numel());
  void* p = t.raw_data();
  return impl_->enqueue(str("allreduce (", reduce_op_name(op), ") of ", format_bytes(n * t.element_size(), 1), " ",
                            dtype_name(dt), take_label()),
                        {t}, [=](ncclComm_t comm, cudaStream_t s) {
                          return ncclAllReduce(p, p, n, nccl_type(dt), nccl_op(op), comm, s);
                        });
}

std::shared_ptr<Work> NcclProcessGroup::broadcast_async(Tensor& t, int root) {
  check_tensor(t, "broadcast", DeviceType::CUDA);
  check_root(root, "broadcast");
  TR_CHECK(t.device().index == impl_->device, "nccl broadcast: the tensor is on ", t.device().str(),
           ", this rank's group drives cuda:", impl_->device);
  const size_t bytes = size_t(t.numel()) * t.element_size();
  void* p = t.raw_data();
  return impl_->enqueue(
      str("broadcast of ", format_bytes(bytes, 1), " ", dtype_name(t.dtype()), " from rank ", root, take_label()), {t},
      [=](ncclComm_t comm, cudaStream_t s) {
        return ncclBroadcast(p, p, bytes, ncclUint8, root, comm, s);  // in place at the root
      });
}

std::shared_ptr<Work> NcclProcessGroup::allgather_async(const Tensor& t, std::vector<Tensor>& out) {
  check_tensor(t, "allgather", DeviceType::CUDA);
  TR_CHECK(t.device().index == impl_->device, "nccl allgather: the tensor is on ", t.device().str(),
           ", this rank's group drives cuda:", impl_->device);
  const int64_t n = t.numel();
  const size_t bytes = size_t(n) * t.element_size();
  NoGradGuard ng;
  Tensor flat = empty({n * size_}, TensorOptions(t.dtype()).device(t.device()));
  out.clear();
  for (int r = 0; r < size_; ++r) out.push_back(flat.narrow(0, r * n, n).view(t.sizes()));
  const void* in = t.raw_data();
  void* o = flat.raw_data();
  return impl_->enqueue(
      str("allgather of ", format_bytes(bytes, 1), " ", dtype_name(t.dtype()), " per rank", take_label()), {t, flat},
      [=](ncclComm_t comm, cudaStream_t s) { return ncclAllGather(in, o, bytes, ncclUint8, comm, s); });
}

std::shared_ptr<Work> NcclProcessGroup::reduce_scatter_async(Tensor& output, Tensor& input, ReduceOp op) {
  check_scatter_gather(input, output, "reduce_scatter", DeviceType::CUDA);
  check_allreduce(input, op, DeviceType::CUDA);
  TR_CHECK(input.device().index == impl_->device, "nccl reduce_scatter: the tensors are on ", input.device().str(),
           ", this rank's group drives cuda:", impl_->device);
  const DType dt = input.dtype();
  const size_t n = size_t(output.numel());
  const void* in = input.raw_data();
  void* out = output.raw_data();  // in place when it is this rank's window of the input (NCCL allows it)
  return impl_->enqueue(str("reduce_scatter (", reduce_op_name(op), ") of ", format_bytes(n * output.element_size(), 1),
                            " ", dtype_name(dt), " per rank", take_label()),
                        {input, output}, [=](ncclComm_t comm, cudaStream_t s) {
                          return ncclReduceScatter(in, out, n, nccl_type(dt), nccl_op(op), comm, s);
                        });
}

std::shared_ptr<Work> NcclProcessGroup::allgather_into_async(Tensor& output, const Tensor& input) {
  check_scatter_gather(output, input, "allgather_into", DeviceType::CUDA);
  TR_CHECK(input.device().index == impl_->device, "nccl allgather_into: the tensors are on ", input.device().str(),
           ", this rank's group drives cuda:", impl_->device);
  const size_t bytes = size_t(input.numel()) * input.element_size();
  const void* in = input.raw_data();
  void* out = output.raw_data();  // in place when the input is this rank's window (NCCL allows it)
  return impl_->enqueue(
      str("allgather_into of ", format_bytes(bytes, 1), " ", dtype_name(input.dtype()), " per rank", take_label()),
      {input, output},
      [=](ncclComm_t comm, cudaStream_t s) { return ncclAllGather(in, out, bytes, ncclUint8, comm, s); });
}

std::shared_ptr<Work> NcclProcessGroup::barrier_async() {
  // NCCL has no barrier: an allreduce of one float, which every rank must reach.
  void* p = impl_->barrier_buf.raw_data();
  return impl_->enqueue("barrier" + take_label(), {impl_->barrier_buf}, [=](ncclComm_t comm, cudaStream_t s) {
    return ncclAllReduce(p, p, 1, ncclFloat32, ncclSum, comm, s);
  });
}

namespace {
const Registrar<ProcessGroupBackend> nccl_backend(
    "nccl", {[](Store& store, const ProcessGroupOptions& opts) -> std::unique_ptr<ProcessGroup> {
      return std::make_unique<NcclProcessGroup>(store, opts);
    }});
}  // namespace

}  // namespace tr::distributed
