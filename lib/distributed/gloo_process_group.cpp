// Gloo backend: rendezvous through our Store, a full TCP mesh, and one communication thread that
// runs the queued collectives in issue order (every rank issues the same sequence, so the n-th
// collective gets tag n everywhere). Gloo errors become tr::Error naming the collective and,
// where it can be told, the peer: from the peer address in Gloo's message, else from the
// arrival log (which ranks recorded that they were waiting in this collective).
#include "distributed/gloo_process_group.h"
#include "core/format_bytes.h"
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include "core/grad_mode.h"
#include "distributed/gloo_store.h"
#include "distributed/shm_allreduce.h"

namespace tr::distributed {

namespace {

using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

int64_t ms_since(Clock::time_point t0) { return std::chrono::duration_cast<ms>(Clock::now() - t0).count(); }

// "[file.cc:123] message" -> "message": the Gloo source location means nothing to a user.
std::string strip_location(const std::string& m) {
  if (!m.empty() && m[0] == '[') {
    auto close = m.find("] ");
    if (close != std::string::npos) return m.substr(close + 2);
  }
  return m;
}

bool contains_address(const std::string& msg, const std::string& addr) {
  for (size_t p = msg.find(addr); p != std::string::npos; p = msg.find(addr, p + 1)) {
    const size_t end = p + addr.size();  // "[h]:4339" must not match "[h]:43395"
    if (end == msg.size() || !std::isdigit(static_cast<unsigned char>(msg[end]))) return true;
  }
  return false;
}

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T> ReduceFn reduce_fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG: return static_cast<ReduceFn>(&gloo::sum<T>);
    case ReduceOp::MAX: return static_cast<ReduceFn>(&gloo::max<T>);
    case ReduceOp::MIN: return static_cast<ReduceFn>(&gloo::min<T>);
  }
  return nullptr;
}

class GlooWork : public Work {
 public:
  GlooWork(std::string name, uint64_t tag, std::function<void(uint32_t)> run)
      : name(std::move(name)), tag(tag), run(std::move(run)) {}
  void wait() override {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return done_; });
    if (err_) std::rethrow_exception(err_);
  }
  bool is_completed() override {
    std::lock_guard<std::mutex> g(mu_);
    return done_;
  }
  void finish(std::exception_ptr e) {
    std::lock_guard<std::mutex> g(mu_);
    err_ = std::move(e);
    done_ = true;
    run = nullptr;  // drops the tensors it held
    cv_.notify_all();
  }

  const std::string name;
  const uint64_t tag;
  std::function<void(uint32_t tag)> run;  // gets the Gloo tag: the issue number, mod 2^32

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr err_;
};

}  // namespace

struct GlooProcessGroup::Impl {
  Impl(Store& store, const ProcessGroupOptions& o);
  ~Impl();

  void rendezvous(const ProcessGroupOptions& o);
  std::shared_ptr<Work> submit(std::string name, std::function<void(uint32_t)> run);
  void stall_for_test(uint64_t tag);
  std::string activity();
  void comm_loop();
  void monitor_loop();
  std::string explain(const GlooWork& w, const std::string& gloo_msg, int64_t elapsed_ms);
  std::string who(int r) const;

  template <typename T> void allreduce(T* p, size_t n, ReduceOp op, uint32_t tag) {
    if (shm) {  // every rank on this machine: through shared memory, no sockets
      shm->allreduce(p, n, op);
      return;
    }
    gloo::AllreduceOptions o(ctx);
    o.setOutput(p, n);
    o.setReduceFunction(reduce_fn<T>(op));
    o.setTag(tag);
    o.setTimeout(timeout);
    gloo::allreduce(o);
    if (op == ReduceOp::AVG) {
      const T s = T(size);  // a local: the loop vectorizes (a member could alias p)
#pragma omp simd
      for (size_t i = 0; i < n; ++i) p[i] = p[i] / s;
    }
  }

  Store& store;
  const std::string prefix;  // "<opts.prefix>/gloo"
  const int rank, size;
  const ms timeout;
  ArrivalLog log;
  std::shared_ptr<gloo::transport::Device> dev;
  std::shared_ptr<gloo::rendezvous::Context> ctx;
  std::vector<std::string> listen_addr;  // rank -> "[host]:port" that appears in Gloo's messages
  std::vector<int> node;                 // rank -> its node (-1: not known)
  std::unique_ptr<ShmAllreduce> shm;     // allreduces, broadcasts between ranks of one machine; null: Gloo's TCP

  std::mutex mu;
  std::condition_variable cv;  // queue changes, current op changes, stop
  std::deque<std::shared_ptr<GlooWork>> queue;
  uint64_t next_tag = 1;
  uint64_t running_tag = 0;  // 0: none
  std::string running_name;
  Clock::time_point running_since;
  uint64_t announced_tag = 0;
  bool stop = false;
  std::string broken;  // the first failure; set only by the comm thread
  std::thread comm, monitor;
};

GlooProcessGroup::Impl::Impl(Store& s, const ProcessGroupOptions& o)
    : store(s),
      prefix(o.prefix + "/gloo"),
      rank(o.rank),
      size(o.size),
      timeout(o.timeout),
      log(s, prefix, o.rank, o.size, o.timeout) {
  if (size == 1) return;  // nothing to connect: every collective is the identity
  rendezvous(o);
  comm = std::thread([this] { comm_loop(); });
  monitor = std::thread([this] { monitor_loop(); });
}

GlooProcessGroup::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> g(mu);
    stop = true;
  }
  cv.notify_all();
  if (comm.joinable()) comm.join();
  if (monitor.joinable()) monitor.join();
}

void GlooProcessGroup::Impl::rendezvous(const ProcessGroupOptions& o) {
  const auto t0 = Clock::now();
  const std::string where = str("gloo rendezvous (store prefix '", o.prefix, "', rank ", rank, " of ", size, ")");
  // 1. Every rank records that it joined; a rank that never does is named here (Gloo itself
  //    would only report a store key it waited for).
  const std::string joined = str(o.node, " ", o.hostname);
  std::vector<std::string> advertised;  // rank -> the address it binds
  for (const Bytes& b :
       join_ranks(store, prefix + "/joined", rank, size, timeout, where, Bytes(joined.begin(), joined.end()))) {
    const std::string v(b.begin(), b.end());
    node.push_back(std::atoi(v.c_str()));
    advertised.push_back(v.substr(std::min(v.size(), v.find(' ') + 1)));
  }
  // 2. Gloo's own full mesh: each pair's address goes through the store.
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = o.hostname;
    dev = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw Error(str(where, ": cannot listen on \"", o.hostname, "\": ", strip_location(e.what())));
  }
  GlooStore adapter(store, prefix + "/mesh");
  ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(timeout);
  try {
    ctx->connectFullMesh(adapter, dev);
  } catch (const std::exception& e) {
    // which address failed, Gloo does not always say: every peer's that this rank cannot share
    std::string peers;
    int listed = 0;
    for (int r = 0; r < size && listed < 8; ++r)
      if (r != rank && advertised[size_t(r)] != o.hostname) {
        peers += str(listed++ ? ", " : "", who(r), " at ", advertised[size_t(r)]);
      }
    throw Error(str(where, ": connecting to the other ranks failed after ", ms_since(t0),
                    " ms: ", strip_location(e.what()), peers.empty() ? "" : str("; the other ranks listen on ", peers),
                    "; this rank listens on ", o.hostname,
                    ". Where an address is not reachable from the other nodes, choose another on its node with "
                    "`trainer run --bind-addr ADDR` or TRAINER_SOCKET_IFNAME=<interface>"));
  }
  // 3. Each rank's listening address, which Gloo prints when a connection fails: lets an error
  //    say "rank 1" instead of "[127.0.0.1]:43395".
  const int other = rank == 0 ? 1 : 0;
  const std::string mine = ctx->getPair(other)->address().str();
  const Bytes mine_bytes(mine.begin(), mine.end());
  for (const Bytes& b : join_ranks(store, prefix + "/addr", rank, size, timeout, where, mine_bytes))
    listen_addr.emplace_back(b.begin(), b.end());
  // 4. Ranks that share this machine reduce and broadcast through shared memory (Gloo's TCP copies
  //    every byte through the kernel twice); allgather and barrier stay on Gloo.
  shm = ShmAllreduce::create(store, prefix, rank, size, timeout);
}

// TR_TEST_STALL_COLLECTIVE=<rank>:<tag>: that rank's collective of that tag (the n-th it issues)
// never finishes, as a rank stuck inside a collective: the hang watchdog's test. Nothing else reads it.
void GlooProcessGroup::Impl::stall_for_test(uint64_t tag) {
  static const std::string spec = [] {
    const char* v = std::getenv("TR_TEST_STALL_COLLECTIVE");
    return std::string(v ? v : "");
  }();
  if (spec.empty() || spec != str(rank, ":", tag)) return;
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return stop; });
}

std::string GlooProcessGroup::Impl::activity() {
  std::lock_guard<std::mutex> g(mu);
  if (running_tag == 0) return queue.empty() ? "" : str(queue.size(), " collective(s) queued, none running");
  const double s = std::chrono::duration<double>(Clock::now() - running_since).count();
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", s);
  return str("gloo ", running_name, ", running for ", secs, " s",
             queue.empty() ? "" : str(", ", queue.size(), " queued behind it"));
}

std::shared_ptr<Work> GlooProcessGroup::Impl::submit(std::string name, std::function<void(uint32_t)> run) {
  std::lock_guard<std::mutex> g(mu);
  TR_CHECK(!stop, "gloo ", name, ": the process group is shutting down");
  const uint64_t tag = next_tag++;
  auto w = std::make_shared<GlooWork>(str(name, " (tag ", tag, ")"), tag, std::move(run));
  queue.push_back(w);
  cv.notify_all();
  return w;
}

void GlooProcessGroup::Impl::comm_loop() {
  while (true) {
    std::shared_ptr<GlooWork> w;
    {
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;  // stopping, nothing left
      w = queue.front();
      queue.pop_front();
      if (stop) {
        l.unlock();
        w->finish(std::make_exception_ptr(
            Error(str("gloo ", w->name, " was not run: the process group was destroyed first"))));
        continue;
      }
      running_tag = w->tag;
      running_name = w->name;
      running_since = Clock::now();
    }
    stall_for_test(w->tag);
    cv.notify_all();  // wakes the monitor
    std::exception_ptr err;
    const auto t0 = Clock::now();
    if (!broken.empty()) {
      err =
          std::make_exception_ptr(Error(str("gloo ", w->name, " was not run: an earlier collective failed: ", broken)));
    } else {
      try {
        w->run(uint32_t(w->tag));
      } catch (const gloo::Exception& e) {
        broken = explain(*w, e.what(), ms_since(t0));
        err = std::make_exception_ptr(Error(broken));
      } catch (const Error& e) {
        err = std::make_exception_ptr(Error(str("gloo ", w->name, ": ", e.what())));
      } catch (const std::exception& e) {
        broken = explain(*w, e.what(), ms_since(t0));
        err = std::make_exception_ptr(Error(broken));
      } catch (...) {
        broken = explain(*w, "unknown exception", ms_since(t0));
        err = std::make_exception_ptr(Error(broken));
      }
    }
    {
      std::lock_guard<std::mutex> g(mu);
      running_tag = 0;
    }
    w->finish(err);
  }
}

// Records "this rank is waiting in collective <tag>" once a collective has run for
// announce_delay(): the arrival log that names the missing rank when a peer times out.
void GlooProcessGroup::Impl::monitor_loop() {
  std::unique_lock<std::mutex> l(mu);
  while (!stop) {
    if (running_tag == 0 || running_tag == announced_tag) {
      cv.wait(l);
      continue;
    }
    const uint64_t tag = running_tag;
    const auto due = running_since + log.announce_delay();
    if (cv.wait_until(l, due, [&] { return stop || running_tag != tag; })) continue;
    announced_tag = tag;
    l.unlock();
    log.announce(tag);
    l.lock();
  }
}

// "rank 3", and on several nodes "rank 3 (node 1 at [10.0.0.2]:41213)": the node a lost peer ran on
std::string GlooProcessGroup::Impl::who(int r) const {
  const bool nodes = std::any_of(node.begin(), node.end(), [&](int n) { return n != node[0]; });
  if (!nodes || size_t(r) >= node.size() || node[size_t(r)] < 0) return str("rank ", r);
  return str("rank ", r, " (node ", node[size_t(r)],
             size_t(r) < listen_addr.size() ? " at " + listen_addr[size_t(r)] : "", ")");
}

std::string GlooProcessGroup::Impl::explain(const GlooWork& w, const std::string& gloo_msg, int64_t elapsed_ms) {
  // This rank did reach the collective, whatever happened: peers diagnosing their own failure
  // must not count it as missing.
  log.announce(w.tag);
  const std::string msg = strip_location(gloo_msg);
  const bool timed_out = msg.find("Timed out") != std::string::npos || msg.find("imeout") != std::string::npos;
  // A connection error names the peer's address: its listening one when this rank dialled it
  // (known from the rendezvous), an ephemeral port when the peer dialled in (unknown, except
  // that a world of two has only one peer).
  int peer = -1;
  if (!timed_out) {
    for (int r = 0; r < size; ++r)
      if (r != rank && contains_address(msg, listen_addr[size_t(r)])) peer = r;
    if (peer < 0 && size == 2) peer = 1 - rank;
  }
  std::string why;
  const bool shm_exit =
      msg.rfind("rank ", 0) == 0 && msg.find(" exited during the shared-memory allreduce") != std::string::npos;
  const bool mismatch = msg.rfind("ranks issued different collectives", 0) == 0;
  if (mismatch)
    return str("gloo ", w.name, " failed on rank ", rank, " of ", size, " after ", elapsed_ms, " ms: the ", msg);
  if (shm_exit)
    why = str(who(std::stoi(msg.substr(5))), " exited or crashed");
  else if (peer >= 0 && msg.find("closed") != std::string::npos)
    why = str(who(peer), " closed the connection (it exited or crashed)");
  else if (peer >= 0)
    why = str("the connection to ", who(peer), " failed");
  else
    why = log.describe(w.tag);
  return str("gloo ", w.name, timed_out ? " timed out" : " failed", " on rank ", rank, " of ", size, " after ",
             elapsed_ms, " ms (timeout ", timeout.count(), " ms): ", why, " [gloo: ", msg, "]");
}

// ---- the group ----

GlooProcessGroup::GlooProcessGroup(Store& store, const ProcessGroupOptions& opts)
    : ProcessGroup(opts.rank, opts.size, opts.timeout), impl_(std::make_unique<Impl>(store, opts)) {}

GlooProcessGroup::~GlooProcessGroup() = default;

bool GlooProcessGroup::shared_memory() const { return impl_->shm != nullptr; }

std::string GlooProcessGroup::describe() const {
  return shared_memory() ? "gloo, allreduce and broadcast through shared memory" : "gloo over tcp";
}

namespace {
// A world of one: the collective is the identity, done at once (AVG of one value is itself).
class DoneWork : public Work {
 public:
  void wait() override {}
  bool is_completed() override { return true; }
};
}  // namespace

std::shared_ptr<Work> GlooProcessGroup::allreduce_async(Tensor& t, ReduceOp op) {
  check_allreduce(t, op, DeviceType::CPU);
  const DType dt = t.dtype();
  const size_t n = size_t(t.numel());
  std::string name =
      str("allreduce (", reduce_op_name(op), ") of ", format_bytes(n * t.element_size(), 1), " ", dtype_name(dt));
  if (size_ == 1) return std::make_shared<DoneWork>();
  Impl* im = impl_.get();
  return impl_->submit(name + take_label(), [im, t, op, dt, n](uint32_t tag) {
    if (n == 0) return;
    void* p = t.raw_data();
    switch (dt) {
      case DType::F32: im->allreduce(static_cast<float*>(p), n, op, tag); break;
      case DType::F64: im->allreduce(static_cast<double*>(p), n, op, tag); break;
      case DType::I64: im->allreduce(static_cast<int64_t*>(p), n, op, tag); break;
      case DType::I32: im->allreduce(static_cast<int32_t*>(p), n, op, tag); break;
      case DType::U8:
      case DType::Bool: im->allreduce(static_cast<uint8_t*>(p), n, op, tag); break;
      case DType::F16:
      case DType::BF16: {
        // Reduced in f32 (as torch accumulates half sums), rounded once at the end.
        std::vector<float> buf(n);
        if (dt == DType::F16) {
          auto* h = static_cast<Half*>(p);
          for (size_t i = 0; i < n; ++i) buf[i] = float(h[i]);
          im->allreduce(buf.data(), n, op, tag);
          for (size_t i = 0; i < n; ++i) h[i] = Half(buf[i]);
        } else {
          auto* h = static_cast<BFloat16*>(p);
          for (size_t i = 0; i < n; ++i) buf[i] = float(h[i]);
          im->allreduce(buf.data(), n, op, tag);
          for (size_t i = 0; i < n; ++i) h[i] = BFloat16(buf[i]);
        }
        break;
      }
    }
  });
}

std::shared_ptr<Work> GlooProcessGroup::broadcast_async(Tensor& t, int root) {
  check_tensor(t, "broadcast", DeviceType::CPU);
  check_root(root, "broadcast");
  const size_t bytes = size_t(t.numel()) * t.element_size();
  if (size_ == 1) return std::make_shared<DoneWork>();
  Impl* im = impl_.get();
  return impl_->submit(
      str("broadcast of ", format_bytes(bytes, 1), " ", dtype_name(t.dtype()), " from rank ", root, take_label()),
      [im, t, root, bytes](uint32_t tag) {
        if (bytes == 0) return;
        if (im->shm) return im->shm->broadcast(t.raw_data(), bytes, root);
        gloo::BroadcastOptions o(im->ctx);
        o.setOutput(static_cast<uint8_t*>(t.raw_data()), bytes);  // the root sends from it
        o.setRoot(root);
        o.setTag(tag);
        o.setTimeout(im->timeout);
        gloo::broadcast(o);
      });
}

std::shared_ptr<Work> GlooProcessGroup::allgather_async(const Tensor& t, std::vector<Tensor>& out) {
  check_tensor(t, "allgather", DeviceType::CPU);
  const int64_t n = t.numel();
  const size_t bytes = size_t(n) * t.element_size();
  NoGradGuard ng;
  Tensor flat = empty({n * size_}, TensorOptions(t.dtype()));
  out.clear();
  for (int r = 0; r < size_; ++r) out.push_back(flat.narrow(0, r * n, n).view(t.sizes()));
  if (size_ == 1) {
    if (n) std::memcpy(flat.raw_data(), t.raw_data(), bytes);
    return std::make_shared<DoneWork>();
  }
  Impl* im = impl_.get();
  return impl_->submit(
      str("allgather of ", format_bytes(bytes, 1), " ", dtype_name(t.dtype()), " per rank", take_label()),
      [im, t, flat, bytes](uint32_t tag) {
        if (bytes == 0) return;
        gloo::AllgatherOptions o(im->ctx);
        o.setInput(static_cast<uint8_t*>(t.raw_data()), bytes);
        o.setOutput(static_cast<uint8_t*>(flat.raw_data()), bytes * size_t(im->size));
        o.setTag(tag);
        o.setTimeout(im->timeout);
        gloo::allgather(o);
      });
}

std::shared_ptr<Work> GlooProcessGroup::reduce_scatter_async(Tensor& output, Tensor& input, ReduceOp op) {
  const DType dt = input.dtype();
  if (!impl_->shm || (dt != DType::F32 && dt != DType::F64))
    return ProcessGroup::reduce_scatter_async(output, input, op);
  check_scatter_gather(input, output, "reduce_scatter", DeviceType::CPU);
  check_allreduce(input, op, DeviceType::CPU);
  const size_t m = size_t(output.numel());
  Impl* im = impl_.get();
  return impl_->submit(str("reduce_scatter (", reduce_op_name(op), ") of ", format_bytes(m * input.element_size(), 1),
                           " ", dtype_name(dt), " per rank", take_label()),
                       [im, input, output, op, dt, m](uint32_t) {
                         if (m == 0) return;
                         if (dt == DType::F32)
                           im->shm->reduce_scatter(static_cast<float*>(input.raw_data()), m, op,
                                                   static_cast<float*>(output.raw_data()));
                         else
                           im->shm->reduce_scatter(static_cast<double*>(input.raw_data()), m, op,
                                                   static_cast<double*>(output.raw_data()));
                       });
}

std::shared_ptr<Work> GlooProcessGroup::allgather_into_async(Tensor& output, const Tensor& input) {
  check_scatter_gather(output, input, "allgather_into", DeviceType::CPU);
  const size_t bytes = size_t(input.numel()) * input.element_size();
  if (size_ == 1) {
    if (bytes && input.raw_data() != output.raw_data()) std::memcpy(output.raw_data(), input.raw_data(), bytes);
    return std::make_shared<DoneWork>();
  }
  Impl* im = impl_.get();
  return impl_->submit(
      str("allgather_into of ", format_bytes(bytes, 1), " ", dtype_name(input.dtype()), " per rank", take_label()),
      [im, input, output, bytes](uint32_t tag) {
        if (bytes == 0) return;
        if (im->shm) return im->shm->allgather_into(input.raw_data(), bytes, output.raw_data());
        // Gloo copies the input into its window itself; an input that is that window
        // is copied first, so the two never overlap in one memcpy
        std::vector<uint8_t> copy;
        const void* in = input.raw_data();
        if (static_cast<const uint8_t*>(in) == static_cast<uint8_t*>(output.raw_data()) + bytes * size_t(im->rank)) {
          copy.assign(static_cast<const uint8_t*>(in), static_cast<const uint8_t*>(in) + bytes);
          in = copy.data();
        }
        gloo::AllgatherOptions o(im->ctx);
        o.setInput(static_cast<uint8_t*>(const_cast<void*>(in)), bytes);
        o.setOutput(static_cast<uint8_t*>(output.raw_data()), bytes * size_t(im->size));
        o.setTag(tag);
        o.setTimeout(im->timeout);
        gloo::allgather(o);
      });
}

std::string GlooProcessGroup::activity() const { return impl_->activity(); }

std::shared_ptr<Work> GlooProcessGroup::barrier_async() {
  if (size_ == 1) return std::make_shared<DoneWork>();
  Impl* im = impl_.get();
  return impl_->submit("barrier" + take_label(), [im](uint32_t tag) {
    gloo::BarrierOptions o(im->ctx);
    o.setTag(tag);
    o.setTimeout(im->timeout);
    gloo::barrier(o);
  });
}

namespace {
const Registrar<ProcessGroupBackend> gloo_backend(
    "gloo", {[](Store& store, const ProcessGroupOptions& opts) -> std::unique_ptr<ProcessGroup> {
      return std::make_unique<GlooProcessGroup>(store, opts);
    }});
}  // namespace

}  // namespace tr::distributed
