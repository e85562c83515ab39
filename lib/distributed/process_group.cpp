// ProcessGroup's backend-independent parts: argument checks, the coalesced allreduce (one flat
// buffer), the backend factory, and the arrival log that lets a timeout name the missing rank.
#include "distributed/process_group.h"
#include <algorithm>
#include <cstdio>
#include <functional>
#include <mutex>
#include <thread>
#include "core/grad_mode.h"
#include "core/cuda_hooks.h"
#include "ops/factories.h"
#include "ops/ops.h"

namespace tr::distributed {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return "sum";
    case ReduceOp::AVG: return "avg";
    case ReduceOp::MAX: return "max";
    case ReduceOp::MIN: return "min";
  }
  return "?";
}

ProcessGroup::ProcessGroup(int rank, int size, std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), timeout_(timeout) {
  TR_CHECK(size >= 1, "process group: world size must be >= 1, got ", size);
  TR_CHECK(rank >= 0 && rank < size, "process group: rank ", rank, " is outside [0, ", size, ")");
  TR_CHECK(timeout.count() > 0, "process group: timeout must be positive, got ", timeout.count(), " ms");
}

void ProcessGroup::check_tensor(const Tensor& t, const char* what, DeviceType expected) const {
  TR_CHECK(t.defined(), backend(), " ", what, ": undefined tensor");
  TR_CHECK(t.device().type == expected, backend(), " ", what, ": the tensor is on ", t.device().str(), ", the ",
           backend(), " backend takes ", expected == DeviceType::CPU ? "CPU" : "CUDA", " tensors");
  TR_CHECK(t.is_contiguous(), backend(), " ", what, ": the tensor (sizes ", t.sizes(), ", strides ", t.strides(),
           ") is not contiguous; collectives work in place on contiguous tensors");
}

void ProcessGroup::check_allreduce(const Tensor& t, ReduceOp op, DeviceType expected) const {
  check_tensor(t, "allreduce", expected);
  const DType dt = t.dtype();
  TR_CHECK(op != ReduceOp::AVG || is_floating(dt), backend(), " allreduce: avg of a ", dtype_name(dt),
           " tensor is not defined (use sum and divide)");
  TR_CHECK(dt != DType::Bool || op == ReduceOp::MAX || op == ReduceOp::MIN, backend(),
           " allreduce: a bool tensor takes max (any) or min (all), not ", reduce_op_name(op));
}

void ProcessGroup::check_root(int root, const char* what) const {
  TR_CHECK(root >= 0 && root < size_, backend(), " ", what, ": root ", root, " is outside [0, ", size_, ")");
}

std::vector<Tensor> ProcessGroup::allgather(const Tensor& t) {
  std::vector<Tensor> out;
  allgather_async(t, out)->wait();
  return out;
}

namespace {
// A collective followed by a copy out of its buffer (the default coalesced allreduce,
// reduce_scatter and allgather_into): `then` runs once, on the first wait(), under no-grad.
class ThenWork : public Work {
 public:
  ThenWork(std::shared_ptr<Work> inner, std::function<void()> then)
      : inner_(std::move(inner)), then_(std::move(then)) {}
  void wait() override {
    inner_->wait();
    std::lock_guard<std::mutex> g(mu_);
    if (!then_) return;
    NoGradGuard ng;
    then_();
    then_ = nullptr;  // (drops the tensors it held)
  }
  bool is_completed() override { return inner_->is_completed(); }
  void synchronize_stream() override {
    inner_->synchronize_stream();
    std::lock_guard<std::mutex> g(mu_);
    if (!then_) return;
    NoGradGuard ng;
    then_();  // device ops, queued behind the collective
    then_ = nullptr;
  }

 private:
  std::shared_ptr<Work> inner_;
  std::function<void()> then_;
  std::mutex mu_;
};
}  // namespace

std::shared_ptr<Work> ProcessGroup::allreduce_coalesced_async(std::vector<Tensor>& ts, ReduceOp op) {
  TR_CHECK(!ts.empty(), backend(), " allreduce_coalesced: no tensors");
  const DType dt = ts[0].dtype();
  const Device dev = ts[0].device();
  int64_t total = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    TR_CHECK(ts[i].defined() && ts[i].dtype() == dt && ts[i].device() == dev, backend(),
             " allreduce_coalesced: tensor ", i, " differs in dtype or device from tensor 0 (", dtype_name(dt), " on ",
             dev.str(), ")");
    TR_CHECK(ts[i].is_contiguous(), backend(), " allreduce_coalesced: tensor ", i, " is not contiguous");
    total += ts[i].numel();
  }
  NoGradGuard ng;
  Tensor flat = empty({total}, TensorOptions(dt).device(dev));
  int64_t off = 0;
  for (auto& t : ts) {
    const int64_t n = t.numel();
    if (n) flat.narrow(0, off, n).copy_(t.view({n}));
    off += n;
  }
  auto inner = allreduce_async(flat, op);
  return std::make_shared<ThenWork>(std::move(inner), [flat, ts] {
    int64_t off = 0;  // the results go back into the caller's tensors
    for (const Tensor& t : ts) {
      const int64_t n = t.numel();
      if (n) t.view({n}).copy_(flat.narrow(0, off, n));
      off += n;
    }
  });
}

void ProcessGroup::allreduce_values(std::vector<double>& values, ReduceOp op, std::string label) {
  NoGradGuard ng;
  Tensor t = from_vector(values, {int64_t(values.size())}, DType::F64).to(device());
  label_next(std::move(label));
  allreduce(t, op);
  values = t.tolist();
}

void ProcessGroup::check_scatter_gather(const Tensor& whole, const Tensor& part, const char* what,
                                        DeviceType expected) const {
  check_tensor(whole, what, expected);
  check_tensor(part, what, expected);
  TR_CHECK(whole.dtype() == part.dtype() && whole.device() == part.device(), backend(), " ", what,
           ": the tensors differ in dtype or device (", dtype_name(whole.dtype()), " on ", whole.device().str(), ", ",
           dtype_name(part.dtype()), " on ", part.device().str(), ")");
  TR_CHECK(whole.numel() == part.numel() * size_, backend(), " ", what, ": ", whole.numel(),
           " elements for all ranks and ", part.numel(), " per rank; a world of ", size_, " needs ",
           part.numel() * size_);
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_async(Tensor& output, Tensor& input, ReduceOp op) {
  check_scatter_gather(input, output, "reduce_scatter", device().type);
  const int64_t n = output.numel();
  Tensor window = input.view({-1}).narrow(0, n * rank_, n);
  auto inner = allreduce_async(input, op);
  return std::make_shared<ThenWork>(std::move(inner), [window, output] {
    if (window.raw_data() != output.raw_data() && output.numel()) output.view({-1}).copy_(window.view({-1}));
  });
}

std::shared_ptr<Work> ProcessGroup::allgather_into_async(Tensor& output, const Tensor& input) {
  check_scatter_gather(output, input, "allgather_into", device().type);
  // the default for backends without a flat allgather: allgather's pieces, copied into output
  auto pieces = std::make_shared<std::vector<Tensor>>();
  auto inner = allgather_async(input.view({-1}), *pieces);
  return std::make_shared<ThenWork>(std::move(inner), [pieces, output] {
    Tensor flat = output.view({-1});
    const int64_t n = flat.numel() / int64_t(pieces->size());
    for (size_t r = 0; r < pieces->size(); ++r) flat.narrow(0, int64_t(r) * n, n).copy_((*pieces)[r]);
  });
}

// ---- factory ----

std::unique_ptr<ProcessGroup> make_process_group(Store& store, const ProcessGroupOptions& opts) {
  std::string b = opts.backend;
  if (b == "auto") b = cuda::is_available() ? "nccl" : "gloo";
  return Registry<ProcessGroupBackend>::get().at(b, "process group").create(store, opts);
}

std::unique_ptr<ProcessGroup> make_process_group(const std::string& backend, Store& store, int rank, int size,
                                                 std::chrono::milliseconds timeout, const std::string& prefix) {
  ProcessGroupOptions o;
  o.backend = backend;
  o.rank = rank;
  o.size = size;
  o.timeout = timeout;
  o.prefix = prefix;
  return make_process_group(store, o);
}

// ---- rendezvous ----

namespace {
std::string rank_list(const std::vector<int>& ranks) {  // "rank 2", "ranks 0, 2"
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += str(i ? ", " : "", ranks[i]);
  return s;
}
}  // namespace

std::vector<Bytes> join_ranks(Store& store, const std::string& key_prefix, int rank, int size,
                              std::chrono::milliseconds timeout, const std::string& where, const Bytes& value) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(str(key_prefix, "/", r));
  store.set(keys[size_t(rank)], value);
  try {
    store.wait(keys, timeout);
  } catch (const Error& e) {
    std::vector<int> missing;
    try {
      for (int r = 0; r < size; ++r)
        if (!store.check({keys[size_t(r)]})) missing.push_back(r);
    } catch (const std::exception&) { missing.clear(); }
    if (missing.empty()) throw Error(str(where, ": waiting for the other ranks failed: ", e.what()));
    const auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    throw Error(str(where, ": timed out after ", waited, " ms (timeout ", timeout.count(), " ms): ", rank_list(missing),
                    " never joined (not started, crashed during startup, or using another store or prefix)"));
  }
  std::vector<Bytes> values;
  for (const auto& k : keys) values.push_back(store.get(k));
  return values;
}

// ---- arrival log ----

ArrivalLog::ArrivalLog(Store& store, std::string prefix, int rank, int size, std::chrono::milliseconds timeout)
    : store_(store), prefix_(std::move(prefix)), rank_(rank), size_(size) {
  // A quarter of the timeout, at most 1 s: late enough that fast collectives never write, early
  // enough that a rank blocked in a collective has written long before its peers time out.
  delay_ = std::clamp(timeout / 4, std::chrono::milliseconds(20), std::chrono::milliseconds(1000));
}

std::string ArrivalLog::key(uint64_t tag, int rank) const { return str(prefix_, "/arrived/", tag, "/", rank); }

void ArrivalLog::announce(uint64_t tag) {
  try {
    store_.set(key(tag, rank_), Bytes{1});
  } catch (const std::exception&) {
    // The store is gone too (the launcher died?): the collective's own error says enough.
  }
}

std::vector<int> ArrivalLog::missing_ranks(uint64_t tag, bool* ok) {
  if (ok) *ok = true;
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r)
    if (r != rank_) missing.push_back(r);
  // A peer that arrived just before this rank gave up writes its record within delay_.
  const auto deadline = std::chrono::steady_clock::now() + delay_ + delay_ / 2 + std::chrono::milliseconds(100);
  try {
    while (true) {
      std::erase_if(missing, [&](int r) { return store_.check({key(tag, r)}); });
      if (missing.empty() || std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception&) {
    if (ok) *ok = false;
    return {};
  }
  return missing;
}

std::string ArrivalLog::describe(uint64_t tag) {
  bool ok = true;
  std::vector<int> missing = missing_ranks(tag, &ok);
  if (!ok) return "(the store could not be asked which rank is missing)";
  if (missing.empty())
    return "every rank reached a collective with this tag, so they disagree on what it is (ranks must issue "
           "the same collectives in the same order) or a connection failed";
  const std::string who = rank_list(missing);
  return str(who, " did not arrive (exited, crashed, or stuck before this collective)");
}

}  // namespace tr::distributed
