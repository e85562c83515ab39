// Asynchronous checkpoints ([checkpoint] async) through the real binary: the same bytes as a
// synchronous write, an exact resume from them, a SIGTERM and a SIGKILL that land inside a
// background write, a background write that fails, and the device path (cuda: the emulator in CI).
// TR_TEST_CHECKPOINT_WRITE_MS makes each write pause before its commit, so the signals land in one.
#include <nlohmann/json.hpp>
#include <set>
#include "integration/cli_harness.h"
#include "integration/cuda_devices.h"

namespace test_async_checkpoint {

using namespace it;

namespace {

// The resolved config without the lines two otherwise identical runs may differ in.
std::string config_without(const std::string& config, const std::vector<std::string>& keys) {
  std::istringstream in(config);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    bool drop = false;
    for (const auto& k : keys) drop = drop || line.rfind(k + " = ", 0) == 0;
    if (!drop) out += line + "\n";
  }
  return out;
}

std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> s;
  for (auto& e : fs::directory_iterator(dir)) s.insert(e.path().filename().string());
  return s;
}

// Every checkpoint directory of run a equals run b's, file by file and byte for byte; state.json
// too, but for the resolved config's `differ` keys. Returns the checkpoints compared.
size_t check_same_checkpoints(const fs::path& a, const fs::path& b, const std::vector<std::string>& differ) {
  const std::set<std::string> dirs = entries(a);
  CHECK(dirs == entries(b));
  size_t n = 0;
  for (const std::string& dir : dirs) {
    if (!fs::is_directory(a / dir)) continue;
    ++n;
    const std::set<std::string> files = entries(a / dir);
    CHECK(files == entries(b / dir));
    for (const std::string& f : files) {
      INFO(dir << "/" << f);
      const std::string x = read(a / dir / f), y = read(b / dir / f);
      if (f == "COMPLETE") continue;  // state.json's checksum: its config differs (checkpoint verify checks it)
      if (f != "state.json") {
        CHECK(x == y);
        continue;
      }
      nlohmann::json jx = nlohmann::json::parse(x), jy = nlohmann::json::parse(y);
      if (jx.contains("config")) {
        CHECK(config_without(jx["config"], differ) == config_without(jy["config"], differ));
        jx.erase("config");
        jy.erase("config");
      }
      CHECK(jx == jy);
    }
  }
  return n;
}

// Without a GPU in the way: the tests of the CPU path hide the emulator's devices.
const std::string kCpu = "CUDA_VISIBLE_DEVICES= ";

}  // namespace

TEST_CASE("async checkpoints: the bytes of synchronous ones, and a resume from them is exact",
          "[integration][checkpoint][async]") {
  fs::path d = fresh_dir("async_bytes");
  write(d / "syn.toml", kSyntheticConfig);
  const std::string run = kCpu + "'" TRAINER_BINARY
                                 "' run syn.toml --set checkpoint.every=5 --set checkpoint.keep_last=0 "
                                 "--set train.epochs=3 --set log.progress=lines ";
  Result s = shell(d, run + "--set run.out_dir=\\\"sync\\\" --set checkpoint.async=false");
  INFO(s.out);
  REQUIRE(s.code == 0);
  Result a = shell(d, run + "--set run.out_dir=\\\"async\\\" --set checkpoint.async=true");
  INFO(a.out);
  REQUIRE(a.code == 0);
  // steps 5..45, the epochs' ends 16, 32, 48, and final/
  CHECK(check_same_checkpoints(d / "sync/syn/checkpoints", d / "async/syn/checkpoints", {"async", "out_dir"}) == 13);

  // stopped and resumed with async writes; the same run as the synchronous one
  Result b1 = shell(d, run + "--set run.out_dir=\\\"resumed\\\" --stop-at-step 23");
  INFO(b1.out);
  REQUIRE(b1.code == 0);
  CHECK_THAT(b1.out, Contains("stopped as asked at step 23"));
  CHECK(fs::exists(d / "resumed/syn/checkpoints/step_23/COMPLETE"));
  Result b2 = shell(d, run + "--set run.out_dir=\\\"resumed\\\" --resume auto");
  INFO(b2.out);
  REQUIRE(b2.code == 0);
  CHECK_THAT(b2.out, Contains("resumed at step 23"));
  CHECK(strip_timing(read(d / "sync/syn/metrics.jsonl")) == strip_timing(read(d / "resumed/syn/metrics.jsonl")));
  CHECK(read(d / "sync/syn/checkpoints/final/model.safetensors") ==
        read(d / "resumed/syn/checkpoints/final/model.safetensors"));
}

TEST_CASE("async checkpoints: SIGTERM during a background write completes it, checkpoints the stop, exits 143",
          "[integration][checkpoint][async]") {
  fs::path d = fresh_dir("async_sigterm");
  write(d / "syn.toml", kSyntheticConfig);
  const std::string common =
      "--set checkpoint.every=5 --set checkpoint.every_epoch=false --set checkpoint.keep_last=0 "
      "--set log.progress=lines --set train.log_every=1";
  Result straight =
      shell(d, kCpu + "'" TRAINER_BINARY "' run syn.toml --set run.name=straight --set train.epochs=4 " + common);
  REQUIRE(straight.code == 0);
  // each write pauses 800 ms, so step 5's is in flight when its temporary directory shows
  Result b = shell(d, kCpu +
                          "TR_TEST_CHECKPOINT_WRITE_MS=800 '" TRAINER_BINARY
                          "' run syn.toml --set run.name=sig "
                          "--set train.epochs=400 " +
                          common +
                          " > sig.log 2>&1 & pid=$!; "
                          "for i in $(seq 1000); do ls -d runs/sig/checkpoints/.tmp-step_5-* >/dev/null 2>&1 && break; "
                          "sleep 0.005; done; kill -TERM $pid; wait $pid; echo \"status $?\"");
  const std::string log = read(d / "sig.log");
  INFO(b.out << log);
  CHECK_THAT(b.out, Contains("status 143"));
  std::smatch m;
  REQUIRE(std::regex_search(log, m, std::regex("stopped by signal 15 at step ([0-9]+)")));
  const std::string stop = m[1].str();
  CHECK(std::stoi(stop) > 5);
  // the write in flight and the stop's both complete, nothing half-written left behind
  Result v = trainer(d, "checkpoint verify runs/sig/checkpoints/step_5 && '" TRAINER_BINARY
                        "' checkpoint verify runs/sig/checkpoints/step_" +
                            stop);
  INFO(v.out);
  CHECK(v.code == 0);
  CHECK(read(d / "runs/sig/checkpoints/latest") == "step_" + stop + "\n");
  for (auto& e : fs::directory_iterator(d / "runs/sig/checkpoints"))
    CHECK(e.path().filename().string().rfind(".tmp", 0) != 0);
  // the resumed run (its length a harmless change) equals the uninterrupted one
  Result c = shell(
      d, kCpu + "'" TRAINER_BINARY "' run syn.toml --set run.name=sig --set train.epochs=4 --resume auto " + common);
  INFO(c.out);
  REQUIRE(c.code == 0);
  CHECK_THAT(c.out, Contains("resumed at step " + stop));
  CHECK(strip_timing(read(d / "runs/straight/metrics.jsonl")) == strip_timing(read(d / "runs/sig/metrics.jsonl")));
  CHECK(read(d / "runs/straight/checkpoints/final/model.safetensors") ==
        read(d / "runs/sig/checkpoints/final/model.safetensors"));
}

TEST_CASE("async checkpoints: SIGKILL during a background write leaves the previous checkpoint newest and resumable",
          "[integration][checkpoint][async]") {
  fs::path d = fresh_dir("async_kill9");
  write(d / "syn.toml", kSyntheticConfig);
  const std::string common =
      "--set checkpoint.every=5 --set checkpoint.every_epoch=false --set checkpoint.keep_last=2 "
      "--set log.progress=lines --set train.epochs=4";
  Result straight = shell(d, kCpu + "'" TRAINER_BINARY "' run syn.toml --set run.name=straight " + common);
  REQUIRE(straight.code == 0);
  Result k = shell(
      d, kCpu + "TR_TEST_CHECKPOINT_WRITE_MS=800 '" TRAINER_BINARY "' run syn.toml --set run.name=killed " + common +
             " > kill.log 2>&1 & pid=$!; "
             "for i in $(seq 1000); do ls -d runs/killed/checkpoints/.tmp-step_10-* >/dev/null 2>&1 && break; "
             "sleep 0.005; done; kill -9 $pid; wait $pid; echo \"status $?\"; cat runs/killed/checkpoints/latest");
  INFO(k.out << read(d / "kill.log"));
  CHECK_THAT(k.out, Contains("status 137"));
  CHECK_THAT(k.out, Contains("step_5\n"));  // latest: step_10 never committed
  CHECK_FALSE(fs::exists(d / "runs/killed/checkpoints/step_10"));
  Result r = shell(d, kCpu + "'" TRAINER_BINARY "' run syn.toml --set run.name=killed --resume auto " + common);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("resumed at step 5"));
  CHECK(strip_timing(read(d / "runs/straight/metrics.jsonl")) == strip_timing(read(d / "runs/killed/metrics.jsonl")));
  CHECK(read(d / "runs/straight/checkpoints/final/model.safetensors") ==
        read(d / "runs/killed/checkpoints/final/model.safetensors"));
  for (auto& e : fs::directory_iterator(d / "runs/killed/checkpoints"))  // the dead writer's temporary: cleaned
    CHECK(e.path().filename().string().rfind(".tmp", 0) != 0);
}

TEST_CASE(
    "async checkpoints: a background write that fails is one error naming the checkpoint, exit 4, the previous one "
    "newest",
    "[integration][checkpoint][async][errors]") {
  fs::path d = fresh_dir("async_fail");
  write(d / "syn.toml", kSyntheticConfig);
  // step 10's temporary directory vanishes while its write pauses: its commit fails in the background
  const std::string sabotage =
      " > run.log 2>&1 & pid=$!; "
      "for i in $(seq 1000); do t=$(ls -d runs/syn/checkpoints/.tmp-step_10-* 2>/dev/null) && break; "
      "sleep 0.005; done; rm -rf \"$t\"; wait $pid; echo \"status $?\"";
  const std::string run = kCpu +
                          "TR_TEST_CHECKPOINT_WRITE_MS=300 '" TRAINER_BINARY
                          "' run syn.toml --set checkpoint.every=5 "
                          "--set checkpoint.every_epoch=false --set checkpoint.keep_last=0 --set log.progress=lines "
                          "--set train.epochs=2 ";
  SECTION("on_error = stop") {
    Result r = shell(d, run + sabotage);
    const std::string log = read(d / "run.log");
    INFO(r.out << log);
    CHECK_THAT(r.out, Contains("status 4"));
    CHECK_THAT(log, Contains("cannot write checkpoint step_10 of run syn (runs/syn/checkpoints/step_10)") &&
                        Contains("the earlier checkpoints are intact (newest: step_5)"));
    CHECK(read(d / "runs/syn/checkpoints/latest") == "step_5\n");
    CHECK_FALSE(fs::exists(d / "runs/syn/checkpoints/step_10"));
    CHECK(trainer(d, "checkpoint verify runs/syn/checkpoints/step_5").code == 0);
  }
  SECTION("on_error = warn: training goes on, the next checkpoint is written") {
    Result r = shell(d, run + "--set checkpoint.on_error=warn" + sabotage);
    const std::string log = read(d / "run.log");
    INFO(r.out << log);
    CHECK_THAT(r.out, Contains("status 0"));
    CHECK_THAT(log, Contains("warning: cannot write checkpoint step_10") && Contains("training goes on"));
    CHECK_FALSE(fs::exists(d / "runs/syn/checkpoints/step_10"));
    CHECK(trainer(d, "checkpoint verify runs/syn/checkpoints/step_15").code == 0);
    CHECK(read(d / "runs/syn/checkpoints/latest") == "step_32\n");
  }
}

TEST_CASE("cuda: async checkpoints of a run on the device: pinned copies, the bytes of synchronous ones, exact resume",
          "[cuda][integration][checkpoint][async]") {
  REQUIRE_CUDA_DEVICES(1);
  fs::path d = fresh_dir("async_cuda");
  write(d / "syn.toml", kSyntheticConfig);
  const std::string run = "'" TRAINER_BINARY
                          "' run syn.toml --set run.device=\\\"cuda\\\" --set checkpoint.every=5 "
                          "--set checkpoint.keep_last=0 --set log.progress=lines --set train.epochs=1 ";
  Result s = shell(d, run + "--set run.out_dir=\\\"sync\\\" --set checkpoint.async=false");
  INFO(s.out);
  REQUIRE(s.code == 0);
  // async, stopped at a checkpoint step and resumed: every checkpoint as the synchronous run's
  Result a1 = shell(d, run + "--set run.out_dir=\\\"async\\\" --stop-at-step 10");
  INFO(a1.out);
  REQUIRE(a1.code == 0);
  Result a2 = shell(d, run + "--set run.out_dir=\\\"async\\\" --resume auto");
  INFO(a2.out);
  REQUIRE(a2.code == 0);
  CHECK_THAT(a2.out, Contains("resumed at step 10"));
  CHECK(check_same_checkpoints(d / "sync/syn/checkpoints", d / "async/syn/checkpoints", {"async", "out_dir"}) ==
        5);  // 5, 10, 15, 16 (the epoch's end), final
  CHECK(strip_timing(read(d / "sync/syn/metrics.jsonl")) == strip_timing(read(d / "async/syn/metrics.jsonl")));
}

}  // namespace test_async_checkpoint
