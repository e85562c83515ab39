// A collective that one rank never joins, over NCCL (two ranks, each on its own GPU; in CI the
// CUDA emulator's two devices): the hang watchdog names the rank and the collective, every rank
// aborts its communicator (ncclCommAbort) and exits with the watchdog's status, none is left
// behind. Skipped, with a message, when the binary sees fewer than two CUDA devices.
#include <chrono>
#include "integration/cli_harness.h"
#include "integration/cuda_devices.h"

namespace test_nccl_hang {

using namespace it;

namespace {

const char* kConfig = R"(
[run]
seed = 7
device = "cuda"
[model]
input = [8]
[[model.layers]]
type = "linear"
out_features = 32
[[model.layers]]
type = "tanh"
[[model.layers]]
type = "linear"
out_features = 4
[data]
dataset = "synthetic"
num_classes = 4
train_size = 6400
eval_size = 1000
batch_size = 128
eval_batch_size = 200
[optimizer]
lr = 0.05
[train]
epochs = 4
log_every = 1000
[log]
progress = "none"
[dist]
hang_timeout_s = 3
)";
// log_every past the hang: the first log line measures the matmul peak on rank 0 alone, which in
// the emulator takes longer than the 3 s timeout while rank 1 waits for it

}  // namespace

TEST_CASE("nccl: a rank that never joins a collective is named, every rank aborts its communicator and exits",
          "[cuda][integration][dist][errors]") {
  REQUIRE_CUDA_DEVICES(2);
  fs::path d = fresh_dir("nccl_hang");
  write(d / "hang.toml", kConfig);
  // rank 1 stops before its 30th collective (a DDP bucket's allreduce, a test hook of the NCCL
  // group) while rank 0 has queued it on its GPU; TMPDIR: where the emulator's communicator lives
  const auto t0 = std::chrono::steady_clock::now();
  Result r = shell(d, "TMPDIR=\"$PWD\" TR_TEST_STALL_COLLECTIVE=1:30 timeout 120 '" TRAINER_BINARY
                      "' run hang.toml --nproc 2 --set run.name=ncclhang; echo rc=$?");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.out);
  CHECK_THAT(r.out, Contains("rc=3"));
  CHECK_THAT(r.out, Contains("TR_TEST_STALL_COLLECTIVE: stalling before nccl collective tag 30"));
  CHECK_THAT(r.out, Contains("hang watchdog: 'step ") && Contains("has run for more than hang_timeout_s = 3.0 s"));
  // the rank, the collective (op, bytes, dtype, DDP bucket, tag) and where the waiting rank is
  CHECK_THAT(r.out, Contains("rank 1 never joined collective tag 30 (allreduce (sum) of 1.6 KiB float32, DDP bucket 0 "
                             "of 1 (4 parameters)), which rank 0 waits in; rank 1 issued up to tag 29"));
  CHECK_THAT(r.out, Contains("in nccl allreduce (sum) of 1.6 KiB float32, DDP bucket 0 of 1 (4 parameters) (tag 30), "
                             "issued "));
  CHECK_THAT(r.out, Contains("[rank 0] rank 0: aborted the nccl communicator (ncclCommAbort)"));
  // the watchdog's timeout, its once-a-second check, rank 0's 2.5 s look at the statuses, the
  // other ranks' wait for its report; start-up and the 25 steps before are a few seconds
  CHECK(secs < 3 + 1 + 2.5 + 3.5 + 8);
  CHECK(shell(d, "pgrep -f 'run.name=ncclhan[g]' | wc -l").out == "0\n");
  CHECK(shell(d, "ls | grep -c tr-cuda-emu-nccl").out == "0\n");  // no communicator file left
}

}  // namespace test_nccl_hang
