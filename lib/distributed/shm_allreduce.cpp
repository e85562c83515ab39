#include "distributed/shm_allreduce.h"
#include <errno.h>
#include <fcntl.h>
#include <immintrin.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include "core/error.h"

namespace tr::distributed {

namespace {

constexpr uint64_t kMagic = 0x7472736861726564ull;  // "trshared"
constexpr int kMaxRanks = 256;
constexpr size_t kLine = 64;
constexpr size_t kHeaderBytes = 4096;                 // magic, size, pids
constexpr size_t kTotalSlotBytes = size_t(64) << 20;  // all ranks' slots together, at most
constexpr int kSpins = 200;                           // ~10 us of pause before sleeping on the futex

long futex(uint32_t* addr, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, addr, op, val, ts, nullptr, 0);
}

// What ranks must share to reduce through one segment: the machine (hostname and boot id), and
// its network and mount namespaces. Ranks in separate network namespaces are separate hosts to
// the user (containers, or the multi-node tests' nodes), and a separate mount namespace may have
// its own /dev/shm.
std::string host_identity() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  std::string id = std::string(host) + " " + boot;
  for (const char* ns : {"/proc/self/ns/net", "/proc/self/ns/mnt"}) {
    char link[128] = {0};
    const ssize_t n = ::readlink(ns, link, sizeof link - 1);
    id += " " + (n > 0 ? std::string(link, size_t(n)) : std::string("?"));
  }
  return id;
}

size_t slot_bytes_for(int size) {
  // 4 MiB per rank and buffer, less in large worlds, a multiple of a cache line
  return std::max<size_t>(kLine,
                          std::min(ShmAllreduce::kSlotBytes, kTotalSlotBytes / (2 * size_t(size))) / kLine * kLine);
}

size_t segment_bytes(int size) {
  return kHeaderBytes + 2 * size_t(size) * kLine + 2 * size_t(size) * slot_bytes_for(size);
}

template <typename T> void reduce_into(T* out, const T* in, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:
      for (size_t i = 0; i < n; ++i) out[i] = out[i] + in[i];
      break;
    case ReduceOp::MAX:
      for (size_t i = 0; i < n; ++i) out[i] = std::max(out[i], in[i]);
      break;
    case ReduceOp::MIN:
      for (size_t i = 0; i < n; ++i) out[i] = std::min(out[i], in[i]);
      break;
  }
}

}  // namespace

std::string ShmAllreduce::describe(const Collective& c) {
  if (c.kind == 2) return str("a broadcast of ", c.bytes, " bytes from rank ", c.arg);
  if (c.kind == 4) return str("an allgather of ", c.bytes, " bytes per rank");
  return str(c.kind == 3 ? "a reduce_scatter (" : "an allreduce (", reduce_op_name(ReduceOp(c.arg)), ") of ", c.bytes,
             " bytes in ", c.elem, "-byte elements");
}

struct ShmAllreduce::Header {
  uint64_t magic;
  int32_t size;
  int32_t pid[kMaxRanks];
};

std::unique_ptr<ShmAllreduce> ShmAllreduce::create(Store& store, const std::string& prefix, int rank, int size,
                                                   std::chrono::milliseconds timeout) {
  if (size < 2 || size > kMaxRanks) return nullptr;
  const std::string where = str("shared-memory allreduce setup (rank ", rank, " of ", size, ")");
  const char* env = std::getenv("TR_DIST_SHM");
  const std::string host = env && std::string(env) == "0" ? "off" : host_identity();
  const std::vector<Bytes> hosts =
      join_ranks(store, prefix + "/shm/host", rank, size, timeout, where, Bytes(host.begin(), host.end()));
  for (const Bytes& h : hosts)
    if (h != hosts[0] || std::string(h.begin(), h.end()) == "off") return nullptr;  // the same answer on every rank

  const size_t bytes = segment_bytes(size);
  std::string name;
  void* base = MAP_FAILED;
  if (rank == 0) {
    std::random_device rd;
    char buf[64];
    std::snprintf(buf, sizeof buf, "/trainer-%d-%08x%08x", int(::getpid()), unsigned(rd()), unsigned(rd()));
    name = buf;
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    // posix_fallocate, not ftruncate: a /dev/shm too small fails here, not with SIGBUS later
    if (fd >= 0 && ::posix_fallocate(fd, 0, off_t(bytes)) == 0)
      base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0) ::close(fd);
    if (base != MAP_FAILED) {
      std::memset(base, 0, kHeaderBytes + 2 * size_t(size) * kLine);
      auto* h = static_cast<Header*>(base);
      h->magic = kMagic;
      h->size = size;
    } else if (fd >= 0) {
      ::shm_unlink(name.c_str());
    }
    const std::string published = base != MAP_FAILED ? name : "";
    store.set(prefix + "/shm/name", Bytes(published.begin(), published.end()));
  } else {
    const Bytes b = store.get(prefix + "/shm/name");
    name.assign(b.begin(), b.end());
    if (!name.empty()) {
      const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
      struct stat st {};
      if (fd >= 0 && ::fstat(fd, &st) == 0 && size_t(st.st_size) == bytes)
        base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (fd >= 0) ::close(fd);
      if (base != MAP_FAILED) {
        auto* h = static_cast<Header*>(base);
        if (h->magic != kMagic || h->size != size) {
          ::munmap(base, bytes);
          base = MAP_FAILED;
        }
      }
    }
  }
  const bool ok = base != MAP_FAILED;
  if (ok) static_cast<Header*>(base)->pid[rank] = int32_t(::getpid());
  const std::vector<Bytes> oks = join_ranks(store, prefix + "/shm/ok", rank, size, timeout, where, Bytes{uint8_t(ok)});
  if (rank == 0 && ok) ::shm_unlink(name.c_str());  // every rank has it mapped: gone with the last one
  bool all = true;
  for (const Bytes& b : oks) all = all && b.size() == 1 && b[0] == 1;
  if (!all) {
    if (ok) ::munmap(base, bytes);
    return nullptr;
  }
  return std::unique_ptr<ShmAllreduce>(new ShmAllreduce(base, bytes, rank, size, timeout));
}

ShmAllreduce::ShmAllreduce(void* base, size_t bytes, int rank, int size, std::chrono::milliseconds timeout)
    : base_(base), bytes_(bytes), rank_(rank), size_(size), timeout_(timeout) {}

ShmAllreduce::~ShmAllreduce() { ::munmap(base_, bytes_); }

uint32_t* ShmAllreduce::flag(int which, int r) const {
  return reinterpret_cast<uint32_t*>(static_cast<unsigned char*>(base_) + kHeaderBytes +
                                     (size_t(which) * size_t(size_) + size_t(r)) * kLine);
}

unsigned char* ShmAllreduce::slot(int r, uint32_t seq) const {
  const size_t sb = slot_bytes_for(size_);
  return static_cast<unsigned char*>(base_) + kHeaderBytes + 2 * size_t(size_) * kLine +
         (size_t(seq & 1u) * size_t(size_) + size_t(r)) * sb;
}

void ShmAllreduce::publish(int which, uint32_t seq) {
  uint32_t* f = flag(which, rank_);
  if (which == 0) {  // what this rank issued, visible with its flag (ranks that issued different
                     // collectives, sizes or roots find out at the first chunk, not mixing data)
    reinterpret_cast<Op*>(f)->what = cur_;
  }
  __atomic_store_n(f, seq, __ATOMIC_RELEASE);
  futex(f, FUTEX_WAKE, INT_MAX, nullptr);
}

void ShmAllreduce::wait_all(int which, uint32_t seq, const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto* h = static_cast<const Header*>(base_);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    uint32_t* f = flag(which, r);
    for (int spins = 0;; ++spins) {
      const uint32_t v = __atomic_load_n(f, __ATOMIC_ACQUIRE);
      if (int32_t(v - seq) >= 0) break;
      if (spins < kSpins) {
        _mm_pause();
        continue;
      }
      const timespec ts{0, 50'000'000};  // wakes when the flag changes, else checks on the peer
      futex(f, FUTEX_WAIT, v, &ts);
      const auto waited = std::chrono::steady_clock::now() - t0;
      if (waited > timeout_)
        throw std::runtime_error(str("Timed out after ",
                                     std::chrono::duration_cast<std::chrono::milliseconds>(waited).count(),
                                     " ms in the shared-memory allreduce waiting for rank ", r, " to ", what));
      if (::kill(h->pid[r], 0) != 0 && errno == ESRCH)
        throw std::runtime_error(str("rank ", r, " (pid ", h->pid[r], ") exited during the shared-memory allreduce"));
    }
    if (which == 0) {
      const Collective& theirs = reinterpret_cast<const Op*>(f)->what;
      if (!(theirs == cur_))
        throw std::runtime_error(str("ranks issued different collectives: rank ", r, " issued ", describe(theirs),
                                     ", rank ", rank_, " ", describe(cur_)));
    }
  }
}

template <typename T>
void ShmAllreduce::reduce(T* data, size_t n, ReduceOp op, size_t keep_lo, size_t keep_n, T* out, uint32_t kind) {
  cur_ = {kind, int32_t(op), int32_t(sizeof(T)), uint64_t(n * sizeof(T))};
  const size_t per_chunk = slot_bytes_for(size_) / sizeof(T);
  const size_t keep_hi = keep_lo + keep_n;
  for (size_t off = 0; off < n; off += per_chunk) {
    const size_t m = std::min(per_chunk, n - off);
    const uint32_t seq = ++seq_;
    std::memcpy(slot(rank_, seq), data + off, m * sizeof(T));
    publish(0, seq);
    wait_all(0, seq, "copy its data in");
    // this rank's share of the chunk, reduced over the slots in rank order into slot 0
    const size_t lo = m * size_t(rank_) / size_t(size_), hi = m * size_t(rank_ + 1) / size_t(size_);
    T* red = reinterpret_cast<T*>(slot(0, seq)) + lo;
    for (int r = 1; r < size_; ++r) reduce_into(red, reinterpret_cast<const T*>(slot(r, seq)) + lo, hi - lo, op);
    if (op == ReduceOp::AVG) {
      const T s = T(size_);
      for (size_t i = 0; i < hi - lo; ++i) red[i] = red[i] / s;
    }
    publish(1, seq);
    wait_all(1, seq, "reduce its share");
    // the kept elements of this chunk (all of it for allreduce); in place, they are elements of
    // this chunk, already copied in
    const size_t a = std::max(off, keep_lo), b = std::min(off + m, keep_hi);
    if (a < b)
      std::memcpy(out + (a - keep_lo), reinterpret_cast<const T*>(slot(0, seq)) + (a - off), (b - a) * sizeof(T));
  }
}

void ShmAllreduce::allgather_into(const void* data, size_t bytes, void* out) {
  cur_ = {4, 0, 1, uint64_t(bytes)};
  const auto* in = static_cast<const unsigned char*>(data);
  auto* o = static_cast<unsigned char*>(out);
  const size_t chunk = slot_bytes_for(size_);
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t m = std::min(chunk, bytes - off);
    const uint32_t seq = ++seq_;
    std::memcpy(slot(rank_, seq), in + off, m);
    publish(0, seq);
    wait_all(0, seq, "copy its data in");
    for (int r = 0; r < size_; ++r) std::memcpy(o + size_t(r) * bytes + off, slot(r, seq), m);
    publish(1, seq);
    wait_all(1, seq, "receive the data");
  }
}

void ShmAllreduce::broadcast(void* data, size_t bytes, int root) {
  cur_ = {2, int32_t(root), 1, uint64_t(bytes)};
  auto* p = static_cast<unsigned char*>(data);
  const size_t chunk = slot_bytes_for(size_);
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t m = std::min(chunk, bytes - off);
    const uint32_t seq = ++seq_;
    if (rank_ == root) std::memcpy(slot(root, seq), p + off, m);
    publish(0, seq);
    wait_all(0, seq, "arrive");  // every rank, so that a mismatch is seen by all
    if (rank_ != root) std::memcpy(p + off, slot(root, seq), m);
    publish(1, seq);
    wait_all(1, seq, "receive the data");
  }
}

#define TR_SHM_REDUCE(T) template void ShmAllreduce::reduce<T>(T*, size_t, ReduceOp, size_t, size_t, T*, uint32_t);
TR_SHM_REDUCE(float)
TR_SHM_REDUCE(double)
TR_SHM_REDUCE(int64_t)
TR_SHM_REDUCE(int32_t)
TR_SHM_REDUCE(uint8_t)
#undef TR_SHM_REDUCE

}  // namespace tr::distributed
