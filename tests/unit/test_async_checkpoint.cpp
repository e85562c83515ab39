// Asynchronous checkpoints' parts: the background writer (jobs in order, one in flight, failures
// kept until collected, the wait at destruction, no stop signals on its thread), the staging copies
// (immune to later in-place updates, one reused buffer, device tensors through page-locked
// memory) and the snapshot writer (a staged snapshot writes the bytes the live one does).
#include <catch2/catch.hpp>
#include <pthread.h>
#include <signal.h>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>
#include "io/async_writer.h"
#include "io/checkpoint_dir.h"
#include "ops/factories.h"
#include "ops/ops.h"
#include "train/checkpoint_snapshot.h"
#include "train/checkpoint_staging.h"
#include "unit/require_gpu.h"
#include "unit/temp_dir.h"

namespace test_async_checkpoint {

using namespace tr;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

using namespace std::chrono_literals;

std::string error_text(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) { return x.what(); }
}

}  // namespace

TEST_CASE("AsyncWriter runs jobs in order, one at a time, off the caller's thread", "[checkpoint][async]") {
  io::AsyncWriter w;
  std::mutex mu;
  std::vector<int> order;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> on_caller{false};
  w.submit([&] {
    on_caller = std::this_thread::get_id() == caller;
    released.wait();
    std::lock_guard<std::mutex> g(mu);
    order.push_back(1);
  });
  CHECK(w.pending());
  CHECK_FALSE(w.poll());  // still running
  // a second job waits for the first: its submit returns only once the first has ended
  std::atomic<bool> second_submitted{false};
  std::thread t([&] {
    w.submit([&] {
      std::lock_guard<std::mutex> g(mu);
      order.push_back(2);
    });
    second_submitted = true;
  });
  std::this_thread::sleep_for(100ms);
  CHECK_FALSE(second_submitted);
  release.set_value();
  t.join();
  CHECK(second_submitted);
  auto o = w.wait();
  REQUIRE(o);
  CHECK_FALSE(o->error);
  CHECK(order == std::vector<int>{1, 2});
  CHECK_FALSE(on_caller);
  CHECK_FALSE(w.pending());
  CHECK_FALSE(w.wait());  // collected once
}

TEST_CASE("AsyncWriter keeps a job's failure until it is collected, and never loses it", "[checkpoint][async]") {
  io::AsyncWriter w;
  w.submit([] { throw Error("checkpoint: write to 'x/model.safetensors' failed: No space left on device"); });
  auto o = w.wait();
  REQUIRE(o);
  REQUIRE(o->error);
  CHECK_THAT(error_text(o->error), Contains("No space left on device"));

  // polled until done: the failure comes once
  w.submit([] { throw Error("second failure"); });
  std::optional<io::AsyncWriter::Outcome> p;
  for (int i = 0; i < 500 && !p; ++i) {
    p = w.poll();
    if (!p) std::this_thread::sleep_for(2ms);
  }
  REQUIRE(p);
  CHECK_THAT(error_text(p->error), Contains("second failure"));
  CHECK_FALSE(w.poll());

  // an uncollected failure stops the next submit, which does not run its job
  w.submit([] { throw Error("third failure"); });
  bool ran = false;
  CHECK_THROWS_WITH(w.submit([&] { ran = true; }), Contains("third failure"));
  CHECK_FALSE(w.wait());
  CHECK_FALSE(ran);
  // and the writer works on
  w.submit([&] { ran = true; });
  auto ok = w.wait();
  REQUIRE(ok);
  CHECK_FALSE(ok->error);
  CHECK(ran);
}

TEST_CASE("AsyncWriter: destruction waits for the job in flight, a job's captures go before its outcome",
          "[checkpoint][async]") {
  std::atomic<bool> finished{false};
  {
    io::AsyncWriter w;
    w.submit([&] {
      std::this_thread::sleep_for(150ms);
      finished = true;
    });
  }
  CHECK(finished);

  io::AsyncWriter w;
  auto held = std::make_shared<int>(7);
  w.submit([held] { (void)*held; });
  REQUIRE(w.wait());
  CHECK(held.use_count() == 1);  // the staged copies a job writes are free once it is collected
}

TEST_CASE("AsyncWriter's thread takes no stop signals: SIGINT and SIGTERM reach the training thread",
          "[checkpoint][async]") {
  io::AsyncWriter w;
  bool int_blocked = false, term_blocked = false;
  w.submit([&] {
    sigset_t cur;
    pthread_sigmask(SIG_SETMASK, nullptr, &cur);
    int_blocked = sigismember(&cur, SIGINT) == 1;
    term_blocked = sigismember(&cur, SIGTERM) == 1;
  });
  REQUIRE(w.wait());
  CHECK(int_blocked);
  CHECK(term_blocked);
  sigset_t mine;
  pthread_sigmask(SIG_SETMASK, nullptr, &mine);
  CHECK_FALSE(sigismember(&mine, SIGINT));  // the caller's mask is as it was
}

TEST_CASE("CheckpointStaging: copies that later in-place updates do not reach, in one reused buffer",
          "[checkpoint][async]") {
  Tensor w = arange(0.0, 12.0, 1.0, DType::F32).reshape({3, 4});
  Tensor v = arange(0.0, 6.0, 1.0, DType::F64).reshape({2, 3}).transpose(0, 1);  // a non-contiguous view
  Tensor n = full({}, 5.0, DType::I64);
  train::CheckpointSnapshot s;
  s.files.push_back({"model.safetensors", {{"w", w}, {"v", v}}, {}});
  s.files.push_back({"optimizer.safetensors", {{"state.0.step", n}}, {}});
  const std::vector<double> w0 = w.tolist(), v0 = v.tolist();
  train::CheckpointStaging staging;
  staging.stage(s);
  CHECK_FALSE(staging.pinned());  // host tensors only: no page-locked memory
  const Tensor& sw = s.files[0].tensors[0].second;
  const Tensor& sv = s.files[0].tensors[1].second;
  const Tensor& sn = s.files[1].tensors[0].second;
  CHECK(sw.sizes() == Shape{3, 4});
  CHECK(sv.sizes() == Shape{3, 2});
  CHECK(sv.is_contiguous());
  CHECK(sv.dtype() == DType::F64);
  CHECK(sn.dtype() == DType::I64);
  CHECK(sn.dim() == 0);
  CHECK(s.files[0].tensors[0].first == "w");
  w.add_(1.0);  // the next optimizer step
  v.mul_(2.0);
  n.fill_(6.0);
  CHECK(sw.tolist() == w0);
  CHECK(sv.tolist() == v0);
  CHECK(sn.item() == 5.0);

  // the next checkpoint, once the write of the copies has released them, reuses the buffer
  const void* first = sw.raw_data();
  const size_t capacity = staging.capacity();
  train::CheckpointSnapshot again;
  again.files.push_back({"model.safetensors", {{"w", w}}, {}});
  SECTION("released: the same memory") {
    s.files.clear();
    staging.stage(again);
    CHECK(again.files[0].tensors[0].second.raw_data() == first);
    CHECK(staging.capacity() == capacity);
    CHECK(again.files[0].tensors[0].second.tolist() == w.tolist());
  }
  SECTION("still held: a new buffer, the held copies untouched") {
    staging.stage(again);
    CHECK(again.files[0].tensors[0].second.raw_data() != first);
    CHECK(sw.tolist() == w0);
  }
}

TEST_CASE("a staged snapshot writes the same checkpoint bytes as the live one", "[checkpoint][async]") {
  TempDir d;
  Tensor w = randn({5, 7});
  Tensor m = randn({5, 7}).to(DType::BF16);
  auto snapshot = [&](const std::string& name) {
    train::CheckpointSnapshot s;
    s.name = name;
    s.files.push_back({"model.safetensors", {{"layer.weight", w}}, {}});
    s.files.push_back({"optimizer.safetensors", {{"state.0.exp_avg", m}}, {{"step", "3"}}});
    s.state = {{"step", 3}, {"config", "x"}};
    return s;
  };
  train::CheckpointSnapshot live = snapshot("step_3"), staged = snapshot("step_3");
  train::CheckpointStaging staging;
  staging.stage(staged);
  train::write_checkpoint_snapshot(d / "live", live);
  w.add_(1.0);  // after the copy: not in the staged checkpoint
  train::write_checkpoint_snapshot(d / "staged", staged);
  for (const char* f : {"model.safetensors", "optimizer.safetensors", "state.json", "COMPLETE"})
    CHECK(read_file(d.path / "live/step_3" / f) == read_file(d.path / "staged/step_3" / f));
  CHECK(io::verify_checkpoint(d / "staged/step_3").ok);
}

TEST_CASE("write_checkpoint_snapshot prunes only after the new checkpoint is complete", "[checkpoint][async]") {
  TempDir d;
  auto snap = [](int64_t step) {
    train::CheckpointSnapshot s;
    s.name = io::checkpoint_name(step);
    s.files.push_back({"model.safetensors", {{"w", full({2}, double(step))}}, {}});
    s.state = {{"step", step}};
    s.keep_last = 2;
    return s;
  };
  for (int64_t step : {10, 20, 30}) train::write_checkpoint_snapshot(d.path.string(), snap(step));
  auto names = [&] {
    std::vector<std::string> v;
    for (auto& c : io::list_checkpoints(d.path.string())) v.push_back(c.name);
    return v;
  };
  CHECK(names() == std::vector<std::string>{"step_20", "step_30"});
  // a write that fails (an undefined tensor) prunes nothing and leaves `latest` where it was
  train::CheckpointSnapshot bad = snap(40);
  bad.files[0].tensors.push_back({"missing", Tensor()});
  CHECK_THROWS_WITH(train::write_checkpoint_snapshot(d.path.string(), bad), Contains("missing"));
  CHECK(names() == std::vector<std::string>{"step_20", "step_30"});
  CHECK(io::read_latest(d.path.string()) == std::optional<std::string>("step_30"));
}

TEST_CASE("CheckpointStaging copies device tensors into page-locked host memory", "[checkpoint][async][gpu]") {
  TR_REQUIRE_GPU();
  const Device gpu(DeviceType::CUDA, 0);
  Tensor host = arange(0.0, 24.0, 1.0, DType::F32).reshape({4, 6});
  Tensor dev = host.to(gpu);
  Tensor view = dev.transpose(0, 1);  // a device view: made contiguous on the device, then copied
  train::CheckpointSnapshot s;
  s.files.push_back({"model.safetensors", {{"w", dev}, {"wt", view}, {"cpu", host}}, {}});
  train::CheckpointStaging staging;
  staging.stage(s);
  CHECK(staging.pinned());
  for (auto& [name, t] : s.files[0].tensors) CHECK(t.device().is_cpu());
  dev.add_(100.0);  // the next step, queued on the device
  CHECK(s.files[0].tensors[0].second.tolist() == host.tolist());
  CHECK(s.files[0].tensors[1].second.tolist() == host.transpose(0, 1).contiguous().tolist());
  CHECK(s.files[0].tensors[2].second.tolist() == host.tolist());
}

}  // namespace test_async_checkpoint
