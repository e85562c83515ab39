// Allreduce (and broadcast) through shared memory for ranks on one machine: the Gloo group's fast
// path for them (gloo_process_group.cpp), where Gloo's TCP transport copies every byte through the
// kernel twice (a 4 MiB allreduce of 2 local ranks took 2.4-3.8 ms over loopback). NCCL does the
// same between GPUs of one host (its SHM transport).
//
// One segment per group: for every rank two slots of kSlotBytes (double-buffered by chunk) and two
// flags. A tensor is reduced in chunks of at most kSlotBytes; for chunk number `seq` each rank
//   1. copies its chunk into its slot and publishes arrived[rank] = seq;
//   2. waits for every arrived[r] >= seq, then reduces its share of the elements (the chunk split
//      in `size` ranges) over the slots in rank order, r = 0, 1, ..., into slot 0, and publishes
//      reduced[rank] = seq;
//   3. waits for every reduced[r] >= seq and copies the whole chunk from slot 0.
// Every element is reduced once, in rank order, so every rank gets the same bits. Double buffering
// makes chunk seq + 2 safe to write: a rank that starts it has seen every rank finish seq + 1,
// hence copy out seq. Waits spin briefly, then sleep on a futex (the flags are futex words), and
// check each peer's pid, so a dead peer is an error at once and a stuck one after the timeout.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include "distributed/process_group.h"

namespace tr::distributed {

class ShmAllreduce {
 public:
  static constexpr size_t kSlotBytes = size_t(4) << 20;

  // Run by every rank of the group at the end of its rendezvous (collective over `store`). Null on
  // every rank unless all of them are on one machine (hostname and boot id, in one network and
  // mount namespace), none sets
  // TR_DIST_SHM=0, and all could map the segment (e.g. /dev/shm too small: Gloo's TCP is used).
  static std::unique_ptr<ShmAllreduce> create(Store& store, const std::string& prefix, int rank, int size,
                                              std::chrono::milliseconds timeout);
  ~ShmAllreduce();
  ShmAllreduce(const ShmAllreduce&) = delete;
  ShmAllreduce& operator=(const ShmAllreduce&) = delete;

  // In place on n elements (float, double, int64_t, int32_t, uint8_t). Throws std::runtime_error
  // ("Timed out ...", or a message naming the rank that exited); the group is then broken.
  template <typename T> void allreduce(T* data, size_t n, ReduceOp op) { reduce(data, n, op, 0, n, data, 1); }
  // reduce_scatter: data holds size * m elements; this rank receives the reduction of
  // data[rank*m, (rank+1)*m) into out (which may be that window of data). The chunks are reduced
  // exactly as allreduce reduces them (the same bits); only the copy out is narrower.
  template <typename T> void reduce_scatter(T* data, size_t m, ReduceOp op, T* out) {
    reduce(data, m * size_t(size_), op, m * size_t(rank_), m, out, 3);
  }
  // allgather_into: out (size * bytes) receives every rank's `bytes` at data in rank order; data
  // may be this rank's window of out. Each chunk: every rank copies its piece into its slot,
  // publishes arrived, copies every slot out, publishes reduced (read).
  void allgather_into(const void* data, size_t bytes, void* out);
  // `bytes` at data from rank root to every rank, in chunks: the root copies a chunk into its slot
  // and publishes arrived; the others copy it out; all publish and wait for reduced (read) before
  // the next chunk, which keeps the double-buffering invariant of allreduce.
  void broadcast(void* data, size_t bytes, int root);

 private:
  ShmAllreduce(void* base, size_t bytes, int rank, int size, std::chrono::milliseconds timeout);
  struct Header;
  uint32_t* flag(int which, int r) const;  // which: 0 arrived, 1 reduced
  unsigned char* slot(int r, uint32_t seq) const;
  void publish(int which, uint32_t seq);
  // Waits until flag `which` of every other rank has reached seq; for `arrived`, checks that they
  // issued the same collective as this rank.
  void wait_all(int which, uint32_t seq, const char* what);
  // The chunked reduction of n elements at data; elements [keep_lo, keep_lo + keep_n) of the
  // result are written to out (out[0] is element keep_lo). kind: 1 allreduce, 3 reduce_scatter.
  template <typename T>
  void reduce(T* data, size_t n, ReduceOp op, size_t keep_lo, size_t keep_n, T* out, uint32_t kind);
  // What a rank issued, kept beside its arrived flag (struct Op, the same cache line).
  struct Collective {
    uint32_t kind = 0;  // 1 allreduce, 2 broadcast, 3 reduce_scatter, 4 allgather
    int32_t arg = 0;    // allreduce: the ReduceOp; broadcast: the root
    int32_t elem = 0;   // allreduce, reduce_scatter: bytes per element
    uint64_t bytes = 0;
    bool operator==(const Collective&) const = default;
  };
  struct Op {
    uint32_t flag;  // the futex word (flag(0, r) points here)
    Collective what;
  };

  void* base_;
  size_t bytes_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  uint32_t seq_ = 0;
  Collective cur_;  // the collective this rank is in
  static std::string describe(const Collective& c);
};

}  // namespace tr::distributed
