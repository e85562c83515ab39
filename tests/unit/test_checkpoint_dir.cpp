// Checkpoint directories: commit, list, latest, verification of damaged checkpoints (each names the
// file at fault) and the fallback to an older one, temporaries, pruning, and a writer SIGKILLed at
// random moments, after which the newest valid checkpoint must always verify.
#include <catch2/catch.hpp>
#include "ops/factories.h"
#include "unit/temp_dir.h"
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include "io/checkpoint_dir.h"
#include "io/checksum.h"
#include "io/safetensors.h"

namespace test_checkpoint_dir {

using namespace tr;
using namespace tr::io;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(s.data(), std::streamsize(s.size()));
}

// A checkpoint as the trainer will write one: model and optimizer tensors plus state.
std::string save_ckpt(const std::string& root, int64_t step, float value = 1.0f) {
  CheckpointWriter w(root, checkpoint_name(step));
  save_safetensors(w.path_for("model.safetensors"),
                   {{"layers.0.weight", full({4, 4}, value)}, {"layers.0.bias", zeros({4})}},
                   {{"step", std::to_string(step)}});
  save_safetensors(w.path_for("optimizer.safetensors"), {{"state.0.exp_avg", full({4, 4}, value / 2)}});
  return w.commit({{"step", step}, {"epoch", 0}, {"rng", {{"seed", 7}}}});
}

std::vector<std::string> temporaries(const std::string& root) {
  std::vector<std::string> out;
  if (!fs::exists(root)) return out;
  for (auto& e : fs::directory_iterator(root))
    if (e.path().filename().string().rfind(".tmp-", 0) == 0) out.push_back(e.path().filename().string());
  return out;
}

std::vector<int64_t> steps(const std::string& root) {
  std::vector<int64_t> out;
  for (auto& c : list_checkpoints(root)) out.push_back(c.step);
  return out;
}

// Rewrites COMPLETE to vouch for the current state.json (simulates a writer bug, not corruption).
void seal_state(const fs::path& dir) {
  std::string text = read_file(dir / "state.json");
  json c = {{"state.json", {{"crc32", crc32_hex(crc32_update(0, text.data(), text.size()))}, {"size", text.size()}}}};
  write_file(dir / "COMPLETE", c.dump());
}

// Rewrites state.json's file table for the files as they are now, then COMPLETE.
void seal_files(const fs::path& dir) {
  json state = json::parse(read_file(dir / "state.json"));
  for (auto& [name, e] : state["files"].items()) {
    FileChecksum c = checksum_file((dir / name).string());
    e = {{"crc32", c.hex()}, {"size", c.size}};
  }
  write_file(dir / "state.json", state.dump(2));
  seal_state(dir);
}

void flip_byte(const fs::path& p, uint64_t at) {
  std::string s = read_file(p);
  REQUIRE(at < s.size());
  s[at] = char(s[at] ^ 0x40);
  write_file(p, s);
}

pid_t dead_pid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

}  // namespace

TEST_CASE("checkpoint: names", "[checkpoint]") {
  CHECK(checkpoint_name(120) == "step_120");
  CHECK(checkpoint_name(0) == "step_0");
  CHECK_THROWS_WITH(checkpoint_name(-1), Contains("non-negative"));
  CHECK(checkpoint_step("step_120") == 120);
  CHECK(checkpoint_step("step_007") == 7);
  for (const char* bad : {"step_", "step_-1", "step_+1", "step_1a", "step_ 1", "xstep_1", "step", "latest", "final",
                          "step_99999999999999999999"})
    CHECK_FALSE(checkpoint_step(bad));
}

TEST_CASE("checkpoint: commit, list, latest and verify", "[checkpoint]") {
  TempDir tmp;
  std::string root = (tmp.path / "runs/x/checkpoints").string();
  std::string p = save_ckpt(root, 120);
  CHECK(p == root + "/step_120");
  CHECK(fs::is_regular_file(p + "/COMPLETE"));
  CHECK(temporaries(root).empty());
  CHECK(read_latest(root) == "step_120");
  CHECK(read_file(root + "/latest") == "step_120\n");

  VerifyReport r = verify_checkpoint(p);
  INFO(r.message());
  REQUIRE(r.ok);
  CHECK(r.message() == "ok");
  CHECK(r.state["step"] == 120);
  CHECK(r.state["rng"]["seed"] == 7);
  for (const char* f : {"model.safetensors", "optimizer.safetensors"}) {
    FileChecksum c = checksum_file(p + "/" + f);
    CHECK(r.state["files"][f]["crc32"] == c.hex());
    CHECK(r.state["files"][f]["size"] == c.size);
  }
  CHECK(r.state["files"].size() == 2);
  CHECK(load_checkpoint_state(p)["epoch"] == 0);
  CHECK(load_safetensors(p + "/model.safetensors")[0].second.tolist() == std::vector<double>(16, 1.0));

  // listed by step (numerically), latest is the one committed last
  save_ckpt(root, 9);
  save_ckpt(root, 100);
  save_ckpt(root, 10);
  CHECK(steps(root) == std::vector<int64_t>{9, 10, 100, 120});
  CHECK(list_checkpoints(root)[1].path == root + "/step_10");
  CHECK(list_checkpoints(root)[1].name == "step_10");
  CHECK(read_latest(root) == "step_10");
  std::vector<std::string> warnings;
  CHECK(newest_valid_checkpoint(root, &warnings) == root + "/step_120");
  CHECK(warnings.empty());
  CHECK(temporaries(root).empty());
}

TEST_CASE("checkpoint: a damaged checkpoint names its file and resume falls back", "[checkpoint]") {
  TempDir tmp;
  std::string root = (tmp.path / "ckpt").string();
  save_ckpt(root, 10);
  fs::path bad = save_ckpt(root, 20, 2.0f);
  std::string want_file, want_problem;

  SECTION("a flipped byte in the tensor data") {
    flip_byte(bad / "model.safetensors", fs::file_size(bad / "model.safetensors") - 3);
    want_file = "model.safetensors";
    want_problem = "crc32";
  }
  SECTION("a flipped byte in the safetensors header") {
    flip_byte(bad / "optimizer.safetensors", 12);
    want_file = "optimizer.safetensors";
    want_problem = "crc32";
  }
  SECTION("a truncated file") {
    fs::resize_file(bad / "optimizer.safetensors", fs::file_size(bad / "optimizer.safetensors") - 8);
    want_file = "optimizer.safetensors";
    want_problem = "size is";
  }
  SECTION("a deleted file") {
    fs::remove(bad / "model.safetensors");
    want_file = "model.safetensors";
    want_problem = "missing";
  }
  SECTION("no COMPLETE marker") {
    fs::remove(bad / "COMPLETE");
    want_file = "COMPLETE";
    want_problem = "missing";
  }
  SECTION("a garbled COMPLETE marker") {
    write_file(bad / "COMPLETE", "{\"state.json\": 3}");
    want_file = "COMPLETE";
    want_problem = "crc32";
  }
  SECTION("a corrupted state.json") {
    flip_byte(bad / "state.json", 5);
    want_file = "state.json";
    want_problem = "crc32";
  }
  SECTION("a state.json that is not JSON (even with a matching COMPLETE)") {
    write_file(bad / "state.json", "{\"step\": 20, \"files\": ");
    seal_state(bad);
    want_file = "state.json";
    want_problem = "unreadable";
  }
  SECTION("a state.json without a file table") {
    write_file(bad / "state.json", "{\"step\": 20}");
    seal_state(bad);
    want_file = "state.json";
    want_problem = "\"files\"";
  }
  SECTION("a state.json listing a path outside the checkpoint") {
    json s = json::parse(read_file(bad / "state.json"));
    s["files"]["../step_10/model.safetensors"] = s["files"]["model.safetensors"];
    write_file(bad / "state.json", s.dump());
    seal_state(bad);
    want_file = "state.json";
    want_problem = "invalid file name";
  }
  SECTION("a lying safetensors header with matching checksums") {
    std::string f = read_file(bad / "model.safetensors");
    f += std::string(8, '\0');  // trailing bytes after the last tensor
    write_file(bad / "model.safetensors", f);
    seal_files(bad);
    want_file = "model.safetensors";
    want_problem = "trailing bytes";
  }

  VerifyReport r = verify_checkpoint(bad.string());
  INFO(r.message());
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.file, EndsWith(want_file));
  CHECK_THAT(r.problem, Contains(want_problem));
  CHECK_THROWS_WITH(load_checkpoint_state(bad.string()), Contains(bad.string()) && Contains(want_file));

  std::vector<std::string> warnings;
  CHECK(newest_valid_checkpoint(root, &warnings) == root + "/step_10");
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0],
             Contains(bad.string()) && Contains(want_file) && Contains(want_problem) && Contains("falling back"));
}

TEST_CASE("checkpoint: nothing valid, nothing there", "[checkpoint]") {
  TempDir tmp;
  std::string root = (tmp.path / "ckpt").string();
  std::vector<std::string> warnings;
  CHECK_FALSE(newest_valid_checkpoint(root, &warnings));  // no root
  CHECK(list_checkpoints(root).empty());
  CHECK_FALSE(read_latest(root));
  fs::create_directories(root + "/step_3");  // a bare directory: damage, worth a warning
  CHECK_FALSE(newest_valid_checkpoint(root, &warnings));
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Contains("step_3") && Contains("COMPLETE"));
  CHECK(list_checkpoints(root).empty());
  write_file(root + "/latest", "../../etc\n");
  CHECK_FALSE(read_latest(root));
  CHECK(verify_checkpoint(root + "/step_404").problem == "not a directory");
}

TEST_CASE("checkpoint: a writer destroyed without commit leaves nothing visible", "[checkpoint]") {
  TempDir tmp;
  std::string root = (tmp.path / "ckpt").string();
  save_ckpt(root, 4, 4.0f);
  {
    CheckpointWriter w(root, "step_5");
    save_safetensors(w.path_for("model.safetensors"), {{"w", ones({2})}});
    CHECK(fs::is_directory(w.temp_dir()));
  }
  try {
    CheckpointWriter w(root, "step_4");  // an abandoned re-save must not touch the committed step_4
    save_safetensors(w.path_for("model.safetensors"), {{"w", ones({2})}});
    throw std::runtime_error("training diverged");
  } catch (const std::runtime_error&) {}
  CHECK(steps(root) == std::vector<int64_t>{4});
  CHECK_FALSE(fs::exists(root + "/step_5"));
  CHECK(temporaries(root).empty());
  CHECK(read_latest(root) == "step_4");
  CHECK(verify_checkpoint(root + "/step_4").ok);
  CHECK(load_safetensors(root + "/step_4/model.safetensors")[0].second.tolist() == std::vector<double>(16, 4.0));
}

TEST_CASE("checkpoint: re-saving a step replaces it whole", "[checkpoint]") {
  TempDir tmp;
  std::string root = (tmp.path / "ckpt").string();
  save_ckpt(root, 7, 1.0f);
  save_ckpt(root, 8, 1.0f);
  std::string p = save_ckpt(root, 7, 3.0f);
  CHECK(verify_checkpoint(p).ok);
  CHECK(load_safetensors(p + "/model.safetensors")[0].second.tolist() == std::vector<double>(16, 3.0));
  CHECK(steps(root) == std::vector<int64_t>{7, 8});
  CHECK(read_latest(root) == "step_7");
  CHECK(temporaries(root).empty());
}

TEST_CASE("checkpoint: the writer's argument checks", "[checkpoint]") {
  TempDir tmp;
  std::string root = (tmp.path / "ckpt").string();
  CHECK_THROWS_WITH(CheckpointWriter(root, "best"), Contains("'best' is not step_<N>"));
  CHECK_THROWS_WITH(CheckpointWriter(root, "../step_1"), Contains("not step_<N>"));
  CheckpointWriter w(root, "step_1");
  for (const char* bad : {"", ".", "..", "a/b", "/etc/passwd"})
    CHECK_THROWS_WITH(w.path_for(bad), Contains("plain file name"));
  CHECK_THROWS_WITH(w.path_for("state.json"), Contains("written by commit()"));
  CHECK_THROWS_WITH(w.path_for("COMPLETE"), Contains("written by commit()"));
  CHECK_THROWS_WITH(w.commit(json::array()), Contains("must be a JSON object"));
  fs::create_directory(w.temp_dir() + "/sub");
  CHECK_THROWS_WITH(w.commit(), Contains("sub") && Contains("not a regular file"));
  fs::remove(w.temp_dir() + "/sub");
  write_file(w.path_for("notes.txt"), "hello");
  CHECK(w.commit(nullptr) == root + "/step_1");  // null state: just the file table
  CHECK(w.committed());
  CHECK_THROWS_WITH(w.commit(), Contains("already committed"));
  CHECK_THROWS_WITH(w.path_for("x"), Contains("already committed"));
  VerifyReport r = verify_checkpoint(root + "/step_1");
  CHECK(r.ok);
  CHECK(r.state["files"]["notes.txt"]["size"] == 5);
}

TEST_CASE("checkpoint: the final weights go through the writer but are never latest, listed or pruned",
          "[checkpoint]") {
  TempDir tmp;
  std::string root = (tmp.path / "ckpt").string();
  save_ckpt(root, 3);
  CheckpointWriter w(root, kFinalCheckpointName);
  save_safetensors(w.path_for("model.safetensors"), {{"w", full({2}, 1.0f)}}, {{"step", "3"}});
  std::string dir = w.commit({{"step", 3}});
  CHECK(dir == (fs::path(root) / "final").string());
  CHECK(verify_checkpoint(dir).ok);
  CHECK(read_latest(root) == "step_3");
  REQUIRE(list_checkpoints(root).size() == 1);
  CHECK(list_checkpoints(root)[0].name == "step_3");
  save_ckpt(root, 4);
  prune(root, 1);
  CHECK(fs::exists(dir + "/model.safetensors"));
  CHECK(newest_valid_checkpoint(root) == (fs::path(root) / "step_4").string());
  // written again (a resumed run's end): replaced whole
  CheckpointWriter again(root, kFinalCheckpointName);
  save_safetensors(again.path_for("model.safetensors"), {{"w", full({2}, 2.0f)}}, {{"step", "5"}});
  again.commit({{"step", 5}});
  CHECK(load_checkpoint_state(dir).at("step") == 5);
}

TEST_CASE("checkpoint: clean_temporaries removes what dead writers left", "[checkpoint]") {
  TempDir tmp;
  std::string root = (tmp.path / "ckpt").string();
  save_ckpt(root, 1);
  std::string dead = std::to_string(dead_pid());
  std::string alive = std::to_string(::getpid());
  fs::create_directories(root + "/.tmp-step_3-" + dead);
  write_file(root + "/.tmp-step_3-" + dead + "/model.safetensors", "partial");
  write_file(root + "/.tmp-latest-" + dead, "step_3\n");
  fs::create_directories(root + "/.tmp-junk");             // no pid: nobody can own it
  fs::create_directories(root + "/.tmp-step_4-" + alive);  // a writer of this process may be at work
  CHECK(clean_temporaries(root) == 3);
  CHECK(temporaries(root) == std::vector<std::string>{".tmp-step_4-" + alive});
  CHECK(verify_checkpoint(root + "/step_1").ok);
  CHECK(clean_temporaries(root) == 0);
  CHECK(clean_temporaries((tmp.path / "absent").string()) == 0);
}

TEST_CASE("checkpoint: prune keeps the newest, the best and latest", "[checkpoint]") {
  TempDir tmp;
  std::string root = (tmp.path / "ckpt").string();
  for (int s = 1; s <= 6; ++s) save_ckpt(root, s);
  CHECK(prune(root, 2, std::string("step_2")) == 3);
  CHECK(steps(root) == std::vector<int64_t>{2, 5, 6});
  CHECK(prune(root, 2, root + "/step_2/") == 0);  // the best given as a path
  CHECK(prune(root, 0) == 0);                     // 0 keeps everything
  CHECK_THROWS_WITH(prune(root, -1), Contains("keep_last"));
  save_ckpt(root, 3);  // latest now names an older step: it is kept as well
  CHECK(prune(root, 1) == 2);
  CHECK(steps(root) == std::vector<int64_t>{3, 6});
  CHECK(temporaries(root).empty());
  for (auto& c : list_checkpoints(root)) CHECK(verify_checkpoint(c.path).ok);
}

namespace {

// Commits checkpoints forever (now and then re-saving the previous step, pruning to 3), reporting
// each committed step on report_fd. Runs in a forked child: no Catch, no Tensor ops, _exit only.
[[noreturn]] void writer_child(const std::string& root, int64_t first, uint32_t seed, int report_fd) {
  try {
    std::mt19937 rng(seed);
    std::vector<uint8_t> model(192 << 10), opt(384 << 10);
    for (int64_t step = first;; ++step) {
      int64_t s = step > first && rng() % 4 == 0 ? step - 1 : step;
      std::fill(model.begin(), model.end(), uint8_t(s));
      std::fill(opt.begin(), opt.end(), uint8_t(s * 3));
      CheckpointWriter w(root, checkpoint_name(s));
      safetensors::write_file(w.path_for("model.safetensors"),
                              {{"w", safetensors::Dtype::U8, {model.size()}, model.data(), model.size()}},
                              {{"step", std::to_string(s)}});
      safetensors::write_file(w.path_for("optimizer.safetensors"),
                              {{"m", safetensors::Dtype::F32, {opt.size() / 4}, opt.data(), opt.size()}}, {});
      w.commit({{"step", s}});
      if (::write(report_fd, &s, sizeof s) != ssize_t(sizeof s)) _exit(4);
      prune(root, 3);
    }
  } catch (const std::exception& e) { std::fprintf(stderr, "writer child: %s\n", e.what()); }
  _exit(3);
}

}  // namespace

TEST_CASE("checkpoint: a writer SIGKILLed at random moments never breaks the newest checkpoint",
          "[checkpoint][crash]") {
  TempDir tmp;
  std::string root = (tmp.path / "ckpt").string();
  std::mt19937 rng(20240611);
  int64_t next = 1, committed_ever = -1;
  int kills = 0;
  for (int round = 0; round < 24; ++round) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      writer_child(root, next, uint32_t(rng()), fds[1]);
    }
    ::close(fds[1]);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 60000));
    REQUIRE(::kill(pid, SIGKILL) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFSIGNALED(status));  // the child failed on its own otherwise (see its stderr)
    ++kills;
    int64_t s = -1, durable = -1;
    while (::read(fds[0], &s, sizeof s) == ssize_t(sizeof s)) durable = std::max(durable, s);
    ::close(fds[0]);
    committed_ever = std::max(committed_ever, durable);

    std::vector<std::string> warnings;
    auto newest = newest_valid_checkpoint(root, &warnings);
    INFO("round " << round << ", last durable step " << durable << ", resumed from " << next);
    CHECK(warnings.empty());  // killed writers leave only .tmp- entries, never a bad step_<N>
    if (committed_ever >= 0) REQUIRE(newest);
    if (newest) {
      int64_t step = *checkpoint_step(fs::path(*newest).filename().string());
      CHECK(step >= durable);  // a commit that returned survives the kill
      VerifyReport r = verify_checkpoint(*newest);
      CHECK(r.ok);
      CHECK(r.state["step"] == step);
      next = step + 1;
    }
    clean_temporaries(root);  // what a resuming trainer does first
    CHECK(temporaries(root).empty());
  }
  CHECK(kills >= 20);
  CHECK(committed_ever > 0);
}

}  // namespace test_checkpoint_dir
