// The rank launcher, driven with /bin/sh scripts as ranks: the torchrun environment, output
// prefixes, a failing rank stopping the others (SIGTERM, SIGKILL after the grace period) with one
// summary naming it, signals reported as such, no orphans (also when the launcher is SIGKILLed),
// forwarding of the user's SIGINT/SIGTERM, restarts with --resume auto, and, with this test binary
// as the ranks, a real rendezvous through the launcher's store.
#include <catch2/catch.hpp>
#include "unit/env_guard.h"
#include "unit/temp_dir.h"
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include "core/error.h"
#include "distributed/env.h"
#include "distributed/launcher.h"

namespace test_launcher {

using namespace tr;
using namespace tr::distributed;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

LaunchOptions sh_ranks(int nproc, const std::string& script) {
  LaunchOptions o;
  o.nproc = nproc;
  o.executable = "/bin/sh";
  o.argv = {"sh", "-c", script, "sh"};  // "sh" is $0; anything appended becomes $1...
  o.grace_seconds = 2;
  return o;
}

struct Result {
  int code;
  std::string out, err;
  double seconds;
};

// Runs launch() in this process with the output going to files in `dir`.
Result run(LaunchOptions o, const TempDir& dir) {
  int out = ::open((dir / "launcher.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err = ::open((dir / "launcher.err").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(out >= 0);
  REQUIRE(err >= 0);
  o.out_fd = out;
  o.err_fd = err;
  auto t0 = std::chrono::steady_clock::now();
  int code = launch(o);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(out);
  ::close(err);
  Result r{code, read_file(dir / "launcher.out"), read_file(dir / "launcher.err"), secs};
  UNSCOPED_INFO("launcher stdout:\n" << r.out << "launcher stderr:\n" << r.err);
  return r;
}

std::map<std::string, std::string> parse_env(const std::string& text) {
  std::map<std::string, std::string> m;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    auto eq = line.find('=');
    if (eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return m;
}

// Alive and not a zombie (a zombie waiting for a non-reaping init has released everything).
bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto close_paren = stat.rfind(')');
  return close_paren == std::string::npos || stat.size() < close_paren + 3 || stat[close_paren + 2] != 'Z';
}

std::vector<pid_t> read_pids(const TempDir& dir, const std::string& prefix, int n) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    std::string t = read_file(dir / (prefix + std::to_string(r)));
    if (!t.empty()) pids.push_back(pid_t(std::stol(t)));
  }
  return pids;
}

bool wait_for_files(const TempDir& dir, const std::string& prefix, int n, std::chrono::milliseconds within) {
  auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    int have = 0;
    for (int r = 0; r < n; ++r) have += !read_file(dir / (prefix + std::to_string(r))).empty();
    if (have == n) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// Waits for a child process with a deadline; its wait status, or nullopt (then it is killed).
std::optional<int> wait_child(pid_t pid, std::chrono::milliseconds within) {
  auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) return st;
    std::this_thread::sleep_for(20ms);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return std::nullopt;
}

// Runs launch() in a forked child (so it can be signalled or SIGKILLed as a whole process).
pid_t fork_launcher(LaunchOptions o, const TempDir& dir) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int code = 99;
    try {
      int out = ::open((dir / "launcher.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int err = ::open((dir / "launcher.err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      o.out_fd = out;
      o.err_fd = err;
      code = launch(o);
    } catch (...) {}
    ::_exit(code);
  }
  return pid;
}

}  // namespace

TEST_CASE("launch: every rank gets torchrun's environment, output is prefixed by rank", "[dist]") {
  TempDir dir;
  EnvGuard env;
  env.set("TRAINER_STORE_TOKEN", std::nullopt);
  SECTION("OMP_NUM_THREADS unset: cores / nproc") {
    env.set("OMP_NUM_THREADS", std::nullopt);
    auto o = sh_ranks(3, "env > " + dir / "env_" + "$RANK; echo out-$RANK; echo err-$RANK >&2");
    Result r = run(o, dir);
    REQUIRE(r.code == 0);
    cpu_set_t set;
    REQUIRE(::sched_getaffinity(0, sizeof set, &set) == 0);
    std::string omp = std::to_string(std::max(1, CPU_COUNT(&set) / 3));
    std::string port, token;
    for (int rank = 0; rank < 3; ++rank) {
      auto e = parse_env(read_file(dir / ("env_" + std::to_string(rank))));
      CHECK(e["RANK"] == std::to_string(rank));
      CHECK(e["LOCAL_RANK"] == std::to_string(rank));
      CHECK(e["WORLD_SIZE"] == "3");
      CHECK(e["LOCAL_WORLD_SIZE"] == "3");
      CHECK(e["MASTER_ADDR"] == "127.0.0.1");
      CHECK(std::stoi(e["MASTER_PORT"]) > 0);
      CHECK(e["TRAINER_STORE_TOKEN"].size() == 32);
      CHECK(e["TRAINER_STORE_HOSTED_BY_LAUNCHER"] == "1");
      CHECK(e["TRAINER_RESTART_COUNT"] == "0");
      CHECK(e["OMP_NUM_THREADS"] == omp);
      if (rank == 0) {
        port = e["MASTER_PORT"];
        token = e["TRAINER_STORE_TOKEN"];
      } else {
        CHECK(e["MASTER_PORT"] == port);
        CHECK(e["TRAINER_STORE_TOKEN"] == token);
      }
    }
    CHECK_THAT(r.out, Contains("\nout-0\n") || Catch::Matchers::StartsWith("out-0\n"));  // rank 0: as is
    CHECK_THAT(r.out, Contains("[rank 1] out-1\n") && Contains("[rank 2] out-2\n"));
    CHECK_THAT(r.err, Contains("[rank 0] err-0\n") && Contains("[rank 2] err-2\n"));
    CHECK_THAT(r.err, !Contains("trainer launch"));  // success is silent
  }
  SECTION("a user's OMP_NUM_THREADS is kept") {
    env.set("OMP_NUM_THREADS", "7");
    Result r = run(sh_ranks(2, "echo $OMP_NUM_THREADS > " + dir / "omp_" + "$RANK"), dir);
    REQUIRE(r.code == 0);
    CHECK(read_file(dir / "omp_0") == "7\n");
    CHECK(read_file(dir / "omp_1") == "7\n");
  }
}

TEST_CASE("launch: a failing rank stops the others, one summary names it with its stderr", "[dist]") {
  TempDir dir;
  // Every rank records its pid and a helper's; rank 1 fails after a moment.
  std::string script = "echo $$ > " + dir / "pid_" + "$RANK; sleep 60 & echo $! > " + dir / "helper_" +
                       "$RANK; if [ $RANK = 1 ]; then sleep 0.3; echo first-line >&2; echo the-cause >&2; exit 3; fi;"
                       " exec sleep 60";
  Result r = run(sh_ranks(3, script), dir);
  CHECK(r.code == 3);
  CHECK(r.seconds < 2.0 + 3.0);  // SIGTERM stopped the others well within the grace period
  CHECK_THAT(r.err, Contains("trainer launch: rank 1 (pid") && Contains("exit status 3") &&
                        Contains("stopped the other 2 ranks"));
  CHECK_THAT(r.err, Contains("    first-line\n    the-cause\n"));
  CHECK_THAT(r.err, !Contains("killed after"));
  // Exactly one summary line.
  size_t count = 0;
  for (size_t at = 0; (at = r.err.find("trainer launch:", at)) != std::string::npos; ++at) ++count;
  CHECK(count == 1);
  // No orphans: the ranks and the helpers they started are all gone.
  auto pids = read_pids(dir, "pid_", 3);
  auto helpers = read_pids(dir, "helper_", 3);
  CHECK(pids.size() == 3);
  CHECK(helpers.size() == 3);
  std::this_thread::sleep_for(100ms);  // helpers are reparented and reaped by init
  for (pid_t p : pids) CHECK_FALSE(alive(p));
  for (pid_t p : helpers) CHECK_FALSE(alive(p));
}

TEST_CASE("launch: ranks that ignore SIGTERM are SIGKILLed after the grace period", "[dist]") {
  TempDir dir;
  std::string script = "trap '' TERM; echo $$ > " + dir / "pid_" +
                       "$RANK; if [ $RANK = 1 ]; then sleep 0.2; exit 4; fi; while :; do sleep 0.05; done";
  auto o = sh_ranks(2, script);
  o.grace_seconds = 1;
  Result r = run(o, dir);
  CHECK(r.code == 4);
  CHECK(r.seconds >= 1.0);
  CHECK(r.seconds < 8.0);  // ~1.2 s; generous for a loaded machine
  CHECK_THAT(r.err, Contains("rank 1") && Contains("exit status 4") &&
                        Contains("1 rank killed after the 1 s grace period") && Contains("wrote nothing to stderr"));
  for (pid_t p : read_pids(dir, "pid_", 2)) CHECK_FALSE(alive(p));
}

TEST_CASE("launch: a SIGKILLed rank is reported as killed by signal 9", "[dist]") {
  TempDir dir;
  Result r = run(sh_ranks(2, "if [ $RANK = 1 ]; then echo dying >&2; kill -9 $$; fi; exec sleep 60"), dir);
  CHECK(r.code == 128 + 9);
  CHECK_THAT(r.err, Contains("rank 1") && Contains("killed by signal 9 (SIGKILL)") && Contains("    dying"));
}

TEST_CASE("launch: the user's SIGINT/SIGTERM is forwarded to every rank", "[dist]") {
  int sig = GENERATE(SIGTERM, SIGINT);
  TempDir dir;
  std::string script = "trap 'echo stopped-$RANK >> " + dir / "trap" + "; exit " + std::to_string(128 + sig) + "' " +
                       (sig == SIGINT ? "INT" : "TERM") + "; echo $$ > " + dir / "pid_" +
                       "$RANK; while :; do sleep 0.05; done";
  pid_t launcher = fork_launcher(sh_ranks(2, script), dir);
  REQUIRE(launcher > 0);
  REQUIRE(wait_for_files(dir, "pid_", 2, 10s));
  auto pids = read_pids(dir, "pid_", 2);
  REQUIRE(::kill(launcher, sig) == 0);
  auto st = wait_child(launcher, 10s);
  REQUIRE(st);
  REQUIRE(WIFEXITED(*st));
  CHECK(WEXITSTATUS(*st) == 128 + sig);
  std::string trap = read_file(dir / "trap");
  CHECK_THAT(trap, Contains("stopped-0") && Contains("stopped-1"));
  CHECK_THAT(read_file(dir / "launcher.err"), Contains(sig == SIGINT ? "stopped by SIGINT" : "stopped by SIGTERM"));
  for (pid_t p : pids) CHECK_FALSE(alive(p));
}

TEST_CASE("launch: a SIGKILLed launcher takes its ranks with it", "[dist]") {
  TempDir dir;
  pid_t launcher = fork_launcher(sh_ranks(2, "echo $$ > " + dir / "pid_" + "$RANK; exec sleep 60"), dir);
  REQUIRE(launcher > 0);
  REQUIRE(wait_for_files(dir, "pid_", 2, 10s));
  auto pids = read_pids(dir, "pid_", 2);
  REQUIRE(pids.size() == 2);
  ::kill(launcher, SIGKILL);
  REQUIRE(wait_child(launcher, 5s));
  auto deadline = std::chrono::steady_clock::now() + 3s;
  bool any = true;
  while (any && std::chrono::steady_clock::now() < deadline) {
    any = false;
    for (pid_t p : pids) any |= alive(p);
    if (any) std::this_thread::sleep_for(20ms);
  }
  CHECK_FALSE(any);
}

TEST_CASE("launch: max_restarts restarts the group with --resume auto", "[dist]") {
  TempDir dir;
  std::string log = dir / "log_";
  // Rank 1 fails on the first attempt only.
  std::string script = "echo \"$TRAINER_RESTART_COUNT $*\" >> " + log +
                       "$RANK; if [ $RANK = 1 ] && [ $TRAINER_RESTART_COUNT = 0 ]; then exit 5; fi; exit 0";
  SECTION("restart once, then success") {
    auto o = sh_ranks(2, script);
    o.max_restarts = 1;
    Result r = run(o, dir);
    CHECK(r.code == 0);
    CHECK(read_file(log + "1") == "0 \n1 --resume auto\n");
    CHECK_THAT(r.err, Contains("exit status 5") && Contains("restarting all 2 ranks (restart 1 of 1)"));
  }
  SECTION("no restarts left: the failure stands") {
    Result r = run(sh_ranks(2, script), dir);
    CHECK(r.code == 5);
    CHECK(read_file(log + "1") == "0 \n");
  }
  SECTION("a --resume already given is kept") {
    auto o = sh_ranks(2, script);
    o.argv.insert(o.argv.end(), {"--resume", "runs/x/checkpoints/step_10"});
    o.max_restarts = 2;
    Result r = run(o, dir);
    CHECK(r.code == 0);
    CHECK(read_file(log + "1") == "0 --resume runs/x/checkpoints/step_10\n1 --resume runs/x/checkpoints/step_10\n");
  }
}

TEST_CASE("launch: an executable that cannot run is a failure naming the reason", "[dist]") {
  TempDir dir;
  LaunchOptions o;
  o.nproc = 2;
  o.executable = "/nonexistent/trainer";
  o.argv = {"trainer"};
  Result r = run(o, dir);
  CHECK(r.code == 127);
  CHECK_THAT(r.err, Contains("cannot execute /nonexistent/trainer: No such file or directory"));
}

TEST_CASE("launch: invalid options are errors", "[dist]") {
  EnvGuard env;
  env.set("TRAINER_STORE_TOKEN", std::nullopt);
  auto o = sh_ranks(2, "true");
  o.nproc = 0;
  CHECK_THROWS_WITH(launch(o), Contains("--nproc"));
  o = sh_ranks(2, "true");
  o.nnodes = 2;
  CHECK_THROWS_WITH(launch(o), Contains("--master-port"));
  o.master_port = 29555;
  CHECK_THROWS_WITH(launch(o), Contains("TRAINER_STORE_TOKEN"));
  o.node_rank = 2;
  CHECK_THROWS_WITH(launch(o), Contains("--node-rank"));
}

// The ranks of the next test: this binary, run by the launcher with only this (hidden) test.
TEST_CASE("launcher child: rendezvous through the launcher's store", "[.][launcher_child]") {
  if (!std::getenv("TRAINER_TEST_LAUNCH_CHILD")) return;
  DistEnv e = read_dist_env();
  std::unique_ptr<TCPStoreServer> hosted;
  auto store = connect_store(e, &hosted, 20s);
  REQUIRE_FALSE(hosted);  // the launcher hosts it
  store->set("rank/" + std::to_string(e.rank), Bytes{uint8_t(e.rank)});
  std::vector<std::string> keys;
  for (int r = 0; r < e.world_size; ++r) keys.push_back("rank/" + std::to_string(r));
  store->wait(keys);
  int64_t joined = store->add("joined", 1);
  REQUIRE(joined <= e.world_size);
  std::cout << "child rank " << e.rank << " of " << e.world_size << " joined" << std::endl;
}

TEST_CASE("launch: ranks of this binary rendezvous through the launcher's store", "[dist]") {
  TempDir dir;
  EnvGuard env;
  env.set("TRAINER_TEST_LAUNCH_CHILD", "1");
  env.set("TRAINER_STORE_TOKEN", std::nullopt);
  LaunchOptions o;
  o.nproc = 3;
  o.argv = {"unit_tests", "[launcher_child]"};
  o.grace_seconds = 2;
  Result r = run(o, dir);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Contains("child rank 0 of 3 joined") && Contains("[rank 1] child rank 1 of 3 joined") &&
                        Contains("[rank 2] child rank 2 of 3 joined"));
}

}  // namespace test_launcher
