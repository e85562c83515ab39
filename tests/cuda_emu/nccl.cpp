// The emulated NCCL. A communicator is a file mapping shared by its ranks' processes (the unique
// id carries its path under TMPDIR; the file is unlinked once every rank has joined, so a killed
// rank leaves nothing behind): a header with, per rank, the sequence numbers of the last
// collective it posted and the last it consumed, then one slot per rank for its part of a
// collective. Collective k, in its stream's turn: once every rank has consumed k - 1 (the slots
// are free), the rank copies its input into its slot and posts k; once every rank has posted k,
// it computes its output from the slots (reductions over ranks 0, 1, ... in order) and consumes
// k. Until then the stream item is not ready, so nothing behind it runs and an event recorded
// after it stays pending: a missing rank shows as a collective that does not complete.
// ncclCommAbort (from any thread, as NCCL allows: a watchdog's) ends the communicator's pending
// collectives at once without waiting for the device, as NCCL's kernels quit when their
// communicator is aborted: the work queued behind them runs, their outputs are undefined.
#include <nccl.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include "half_convert.h"
#include "runtime_internal.h"

namespace {

constexpr int kMaxRanks = 64;
constexpr size_t kSlotBytes = size_t(64) << 20;  // a rank's part of one collective, at most
constexpr size_t kHeaderBytes = 4096;

struct Header {
  std::atomic<int32_t> joined;
  std::atomic<uint64_t> posted[kMaxRanks];
  std::atomic<uint64_t> consumed[kMaxRanks];
};
static_assert(sizeof(Header) <= kHeaderBytes, "header");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared atomics");

std::string id_path(const ncclUniqueId& id) {
  return std::string(id.internal, strnlen(id.internal, sizeof id.internal));
}

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
  }
  return 0;
}

}  // namespace

namespace {
// What a communicator's queued collectives use. They share it with the handle, so that an abort
// can drop the handle without waiting for them: the mapping goes when the last of them has run.
struct CommShared {
  std::string path;
  int fd = -1;
  unsigned char* base = nullptr;
  size_t bytes = 0;
  int nranks = 0, rank = 0;
  std::atomic<bool> aborted{false};
  Header* header() const { return reinterpret_cast<Header*>(base); }
  unsigned char* slot(int r) const { return base + kHeaderBytes + size_t(r) * kSlotBytes; }
  ~CommShared() {
    if (base) munmap(base, bytes);
    if (fd >= 0) close(fd);
  }
};
}  // namespace

struct ncclComm {
  std::shared_ptr<CommShared> shared;
  int device = 0;
  uint64_t issued = 0;  // collectives enqueued by this rank
  bool unlinked = false;
  std::string last_error;
  int nranks() const { return shared->nranks; }
  int rank() const { return shared->rank; }
};

namespace {

using namespace cuda_emu;

// Whether every rank has joined; the first time it is seen, the file goes (the ranks' mappings
// keep it), so that a killed rank leaves no file in TMPDIR.
bool all_joined(ncclComm* c) {
  if (c->shared->header()->joined.load() < c->nranks()) return false;
  if (!c->unlinked) {
    unlink(c->shared->path.c_str());  // a peer may have done it: ENOENT is fine
    c->unlinked = true;
  }
  return true;
}

template <typename T> T combine(T a, T b, ncclRedOp_t op) {
  switch (op) {
    case ncclSum:
    case ncclAvg: return a + b;
    case ncclProd: return a * b;
    case ncclMax: return a > b ? a : b;
    case ncclMin: return a < b ? a : b;
  }
  return a;
}

// out[i] = op over ranks (in rank order) of slot_r[i]
template <typename T> void reduce_slots(const CommShared* c, void* out, size_t count, ncclRedOp_t op, size_t first) {
  T* o = static_cast<T*>(out);
  for (size_t i = 0; i < count; ++i) {
    T acc = reinterpret_cast<const T*>(c->slot(0))[first + i];
    for (int r = 1; r < c->nranks; ++r) acc = combine(acc, reinterpret_cast<const T*>(c->slot(r))[first + i], op);
    if (op == ncclAvg) acc = T(acc / T(c->nranks));
    o[i] = acc;
  }
}
// f16 / bf16: combined in f32, rounded once
void reduce_slots_16(const CommShared* c, void* out, size_t count, ncclRedOp_t op, bool bf16, size_t first) {
  auto* o = static_cast<uint16_t*>(out);
  auto load = [&](int r, size_t i) {
    const uint16_t v = reinterpret_cast<const uint16_t*>(c->slot(r))[first + i];
    return bf16 ? bf16_to_float(v) : half_to_float(v);
  };
  for (size_t i = 0; i < count; ++i) {
    float acc = load(0, i);
    for (int r = 1; r < c->nranks; ++r) acc = combine(acc, load(r, i), op);
    if (op == ncclAvg) acc /= float(c->nranks);
    o[i] = bf16 ? float_to_bf16(acc) : float_to_half(acc);
  }
}

// out[i] = the ranks' element first + i combined, i < count (reduce_scatter's window; 0 for allreduce)
void reduce(const CommShared* c, void* out, size_t count, ncclDataType_t t, ncclRedOp_t op, size_t first = 0) {
  switch (t) {
    case ncclInt8: reduce_slots<int8_t>(c, out, count, op, first); break;
    case ncclUint8: reduce_slots<uint8_t>(c, out, count, op, first); break;
    case ncclInt32: reduce_slots<int32_t>(c, out, count, op, first); break;
    case ncclUint32: reduce_slots<uint32_t>(c, out, count, op, first); break;
    case ncclInt64: reduce_slots<int64_t>(c, out, count, op, first); break;
    case ncclUint64: reduce_slots<uint64_t>(c, out, count, op, first); break;
    case ncclFloat32: reduce_slots<float>(c, out, count, op, first); break;
    case ncclFloat64: reduce_slots<double>(c, out, count, op, first); break;
    case ncclFloat16: reduce_slots_16(c, out, count, op, false, first); break;
    case ncclBfloat16: reduce_slots_16(c, out, count, op, true, first); break;
  }
}

// Queues collective number k of `c`: post `in` (bytes of it) into this rank's slot, then, once
// every rank has posted, `finish` writes the output from the slots.
ncclResult_t collective(ncclComm_t c, const void* in, size_t bytes, cudaStream_t stream,
                        std::function<void(const CommShared*)> finish) {
  if (!c) return ncclInvalidArgument;
  if (bytes > kSlotBytes) {
    c->last_error =
        "the emulator's NCCL moves at most " + std::to_string(kSlotBytes) + " bytes per rank and collective";
    return ncclInvalidArgument;
  }
  if (bytes && (device_of(in) != c->device)) {
    c->last_error = "the input is not in the communicator's device memory";
    return ncclInvalidArgument;
  }
  CUstream_st* s = stream_of(stream);
  if (!s) return ncclUnhandledCudaError;
  const uint64_t k = ++c->issued;
  count(Counter::Kernel);
  auto posted = std::make_shared<bool>(false);
  enqueue(s, [sh = c->shared, in, bytes, k, posted, finish] {
    if (sh->aborted) return true;  // an aborted communicator's work ends (its outputs are undefined)
    Header* h = sh->header();
    if (!*posted) {
      for (int r = 0; r < sh->nranks; ++r)
        if (h->consumed[r].load(std::memory_order_acquire) + 1 < k) return false;  // a slot is still being read
      std::memcpy(sh->slot(sh->rank), in, bytes);
      h->posted[sh->rank].store(k, std::memory_order_release);
      *posted = true;
    }
    for (int r = 0; r < sh->nranks; ++r)
      if (h->posted[r].load(std::memory_order_acquire) < k) return false;
    finish(sh.get());
    h->consumed[sh->rank].store(k, std::memory_order_release);
    return true;
  });
  return ncclSuccess;
}

}  // namespace

ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
  }
  return "unknown result code";
}
const char* ncclGetLastError(ncclComm_t comm) { return comm ? comm->last_error.c_str() : ""; }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0, sizeof *id);
  const char* tmp = std::getenv("TMPDIR");
  std::random_device rd;
  std::snprintf(id->internal, sizeof id->internal, "%s/tr-cuda-emu-nccl-%d-%08x%08x", tmp && *tmp ? tmp : "/tmp",
                int(getpid()), rd(), rd());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  *comm = nullptr;
  if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  auto sh = std::make_shared<CommShared>();
  sh->path = id_path(id);
  sh->nranks = nranks;
  sh->rank = rank;
  sh->bytes = kHeaderBytes + size_t(nranks) * kSlotBytes;
  sh->fd = open(sh->path.c_str(), O_RDWR | O_CREAT, 0600);
  if (sh->fd < 0 || ftruncate(sh->fd, off_t(sh->bytes)) != 0) return ncclSystemError;
  void* p = mmap(nullptr, sh->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, sh->fd, 0);
  if (p == MAP_FAILED) return ncclSystemError;
  sh->base = static_cast<unsigned char*>(p);
  sh->header()->joined.fetch_add(1);
  auto* c = new ncclComm;
  c->shared = std::move(sh);
  cudaGetDevice(&c->device);
  *comm = c;
  const bool blocking = !config || config->blocking;
  if (!blocking) return ncclInProgress;
  while (!all_joined(c)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

// A collective that waits for a rank is no error, as in NCCL: only the initialisation is in progress.
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  if (!comm) return ncclInvalidArgument;
  *state = all_joined(comm) ? ncclSuccess : ncclInProgress;
  return ncclSuccess;
}
ncclResult_t ncclCommCount(ncclComm_t comm, int* count) {
  *count = comm->nranks();
  return ncclSuccess;
}
ncclResult_t ncclCommUserRank(ncclComm_t comm, int* rank) {
  *rank = comm->rank();
  return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t comm) { return comm ? ncclSuccess : ncclInvalidArgument; }

namespace {
// Runs the device's queued work (the communicator's collectives among it) to its end.
void drain(const ncclComm* comm) {
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(comm->device);
  cudaDeviceSynchronize();
  cudaSetDevice(prev);
}

}  // namespace

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  drain(comm);  // NCCL's destroy completes the communicator's work first
  delete comm;
  return ncclSuccess;
}
// No wait for the device (the hung collectives it is called for would never end): the pending
// collectives see the flag in their stream's turn and end; the mapping goes with the last of them.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  comm->shared->aborted = true;
  delete comm;
  return ncclSuccess;
}
ncclResult_t ncclGroupStart() { return ncclSuccess; }
ncclResult_t ncclGroupEnd() { return ncclSuccess; }

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * type_size(type);
  return collective(comm, send, bytes, stream,
                    [recv, count, type, op](const CommShared* c) { reduce(c, recv, count, type, op); });
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  if (!comm || root < 0 || root >= comm->nranks()) return ncclInvalidArgument;
  const size_t bytes = count * type_size(type);
  // every rank posts (the others' parts are ignored), so the slots stay in step
  return collective(comm, comm->rank() == root ? send : recv, comm->rank() == root ? bytes : 0, stream,
                    [recv, bytes, root](const CommShared* c) { std::memcpy(recv, c->slot(root), bytes); });
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recvcount, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  if (!comm) return ncclInvalidArgument;
  const size_t bytes = recvcount * size_t(comm->nranks()) * type_size(type);
  const size_t first = recvcount * size_t(comm->rank());
  return collective(comm, send, bytes, stream, [recv, recvcount, type, op, first](const CommShared* c) {
    reduce(c, recv, recvcount, type, op, first);
  });
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  const size_t bytes = sendcount * type_size(type);
  return collective(comm, send, bytes, stream, [recv, bytes](const CommShared* c) {
    for (int r = 0; r < c->nranks; ++r)
      std::memcpy(static_cast<unsigned char*>(recv) + size_t(r) * bytes, c->slot(r), bytes);
  });
}
