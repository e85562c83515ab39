// A collective that one rank never joins, through the NCCL process group: it stays pending on the
// GPU (the host does not wait in it), the group names it to the hang watchdog, and abort() ends it
// (ncclCommAbort) so that the stream behind it drains and every wait fails with the reason instead
// of hanging. [gpu]: two GPUs (the emulation build shows two), ranks are threads.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include "core/cuda_hooks.h"
#include "distributed/process_group.h"
#include "ops/factories.h"
#include "unit/fork_ranks.h"
#include "unit/require_gpu.h"

namespace test_nccl_abort {

using namespace tr;
using namespace tr::distributed;
using Catch::Matchers::Contains;
using fork_ranks::FileStore;
using ms = std::chrono::milliseconds;

TEST_CASE("nccl: a collective one rank never joins stays pending until abort() ends it", "[dist][gpu]") {
  TR_REQUIRE_GPU();
  if (cuda::device_count() < 2) {
    WARN("needs 2 CUDA devices; " << cuda::device_count() << " visible");
    return;
  }
  TempDir dir;
  FileStore store(dir.path);
  store.set_timeout(ms(60000));
  auto make = [&](int rank) {
    ProcessGroupOptions o;
    o.backend = "nccl";
    o.rank = rank;
    o.size = 2;
    o.timeout = ms(60000);
    o.prefix = "abort";
    o.cuda_device = rank;
    return make_process_group(store, o);
  };
  std::unique_ptr<ProcessGroup> pgs[2];
  std::thread peer([&] { pgs[1] = make(1); });
  pgs[0] = make(0);
  peer.join();
  ProcessGroup& pg = *pgs[0];

  // rank 1 never issues it
  Tensor t = full({400}, 1.0).to(Device(DeviceType::CUDA, 0));
  pg.label_next("DDP bucket 0 of 1");
  std::shared_ptr<Work> w = pg.allreduce_async(t, ReduceOp::SUM);
  std::this_thread::sleep_for(ms(200));
  CHECK_FALSE(w->is_completed());
  const ProcessGroup::CollectiveProgress p0 = pg.collective_progress(), p1 = pgs[1]->collective_progress();
  CHECK(p0.issued == 1);
  CHECK(p0.pending_tag == 1);
  CHECK(p0.pending == "allreduce (sum) of 1.6 KiB float32, DDP bucket 0 of 1");
  CHECK(p1.issued == 0);
  CHECK(p1.pending_tag == 0);
  CHECK_THAT(pg.activity(), Contains("nccl allreduce (sum) of 1.6 KiB float32, DDP bucket 0 of 1 (tag 1), issued ") &&
                                Contains("not complete on the GPU"));
  CHECK(pgs[1]->activity().empty());

  // from another thread, as the watchdog does, while this one would wait
  std::thread watchdog([&] { pg.abort("rank 1 never joined"); });
  watchdog.join();
  CHECK_THROWS_WITH(w->wait(), Contains("the process group was aborted: rank 1 never joined"));
  const auto t0 = std::chrono::steady_clock::now();
  cuda::synchronize(0);  // the stream behind the aborted collective drains
  CHECK(std::chrono::steady_clock::now() - t0 < ms(5000));
  CHECK(pg.collective_progress().pending_tag == 0);
  CHECK(pg.activity().empty());
  CHECK_THROWS_WITH(pg.allreduce(t), Contains("was not run: an earlier collective failed"));
  pg.abort("again");  // a second abort is harmless
}

}  // namespace test_nccl_abort
