// Forked ranks for process-group tests: a Store over files (an in-process store cannot cross
// fork()), run_ranks() that forks n ranks and reports each one's exit and messages, never hanging
// (a rank still running after the limit is killed and the test fails), and gloo groups over it.
#pragma once
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <omp.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <thread>
#include <utility>
#include "distributed/process_group.h"
#include "unit/temp_dir.h"

namespace fork_ranks {

using namespace tr;
using namespace tr::distributed;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

// A Store over files in one directory: works across fork(), each set is a write + rename (so a
// reader sees all of a value or nothing), add() holds an flock.
class FileStore : public Store {
 public:
  explicit FileStore(fs::path dir) : dir_(std::move(dir)) { fs::create_directories(dir_); }
  void set(const std::string& key, const Bytes& v) override {
    const fs::path tmp = dir_ / (".tmp." + std::to_string(::getpid()) + "." + std::to_string(seq_++));
    {
      std::ofstream f(tmp, std::ios::binary);
      f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size()));
    }
    fs::rename(tmp, path(key));
  }
  Bytes get(const std::string& key) override {
    wait({key}, timeout());
    std::ifstream f(path(key), std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(f), {});
  }
  int64_t add(const std::string& key, int64_t delta) override {
    const int fd = ::open((dir_ / ".lock").c_str(), O_CREAT | O_RDWR, 0600);
    TR_CHECK(fd >= 0, "FileStore: cannot open the lock file");
    ::flock(fd, LOCK_EX);
    int64_t v = 0;
    if (check({key})) {
      Bytes b = get(key);
      v = std::stoll(std::string(b.begin(), b.end()));
    }
    v += delta;
    const std::string s = std::to_string(v);
    set(key, Bytes(s.begin(), s.end()));
    ::flock(fd, LOCK_UN);
    ::close(fd);
    return v;
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    while (true) {
      std::vector<std::string> missing;
      for (const auto& k : keys)
        if (!fs::exists(path(k))) missing.push_back(k);
      if (missing.empty()) return;
      if (Clock::now() >= deadline)
        throw Error(str("FileStore: timed out after ", timeout.count(), " ms waiting for keys ", missing));
      std::this_thread::sleep_for(ms(2));
    }
  }
  bool check(const std::vector<std::string>& keys) override {
    for (const auto& k : keys)
      if (!fs::exists(path(k))) return false;
    return true;
  }
  bool delete_key(const std::string& key) override { return fs::remove(path(key)); }

 private:
  fs::path path(const std::string& key) const {
    std::string f;
    for (char c : key) f += c == '/' ? std::string("%2F") : c == '%' ? std::string("%25") : std::string(1, c);
    return dir_ / f;
  }
  fs::path dir_;
  std::atomic<uint64_t> seq_{0};
};

// In a child: a failed expectation is an Error (Catch's assertions do not cross fork()).
#define EXPECT(cond, ...) TR_CHECK(cond, "rank check failed: " #cond ": ", __VA_ARGS__)

struct RankResult {
  int status = -1;  // exit code, or -signal
  std::string out;  // what the rank wrote to its report
};

// A start line for fork()ed children: each child waits in wait() until the parent, having forked
// them all, calls open(). A child that started at once could talk to a store server thread in the
// parent, which could then hold the allocator's lock at the next fork; under ASan (whose allocator
// has no fork handlers in clang 14) that child waited for it forever (5 of 10 runs of a test with
// a TCP store hung on a loaded machine).
struct StartGate {
  int fd[2] = {-1, -1};
  StartGate() { REQUIRE(::pipe(fd) == 0); }
  ~StartGate() { open(); }
  // in a child: returns once every write end is closed (the parent's in open(), the children's here)
  void wait() {
    ::close(std::exchange(fd[1], -1));
    char c;
    while (::read(fd[0], &c, 1) < 0 && errno == EINTR) {}
    ::close(std::exchange(fd[0], -1));
  }
  void open() {
    for (int& f : fd)
      if (f >= 0) ::close(std::exchange(f, -1));
  }
};

// Forks n ranks running body(rank, store, report); an exception in a rank fails it, its message
// in the report. Every rank is killed if they have not all finished within `limit` (a hang). The
// ranks start together, once all are forked (StartGate).
using StoreFactory = std::function<std::unique_ptr<Store>(const fs::path& dir)>;

inline std::vector<RankResult> run_ranks(int n, const std::function<void(int, Store&, std::ostream&)>& body,
                                         ms limit = ms(60000), int started = -1,
                                         const StoreFactory& make_store = nullptr) {
  TempDir dir;
  if (started < 0) started = n;
  std::cout.flush();
  std::cerr.flush();
  std::vector<pid_t> pids;
  StartGate gate;
  for (int r = 0; r < started; ++r) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      gate.wait();
      omp_set_num_threads(1);  // one math thread per rank: two ranks share two cores
      std::ofstream report(dir.path / ("report." + std::to_string(r)));
      int code = 0;
      try {
        std::unique_ptr<Store> store =
            make_store ? make_store(dir.path) : std::make_unique<FileStore>(dir.path / "store");
        body(r, *store, report);
      } catch (const std::exception& e) {
        report << "EXCEPTION: " << e.what() << "\n";
        code = 1;
      }
      report.close();
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  gate.open();
  std::vector<RankResult> res(static_cast<size_t>(started));
  std::vector<bool> done(static_cast<size_t>(started), false);
  const auto deadline = Clock::now() + limit;
  int left = started;
  while (left > 0) {
    for (int r = 0; r < started; ++r) {
      if (done[size_t(r)]) continue;
      int st = 0;
      if (::waitpid(pids[size_t(r)], &st, WNOHANG) == pids[size_t(r)]) {
        done[size_t(r)] = true;
        --left;
        res[size_t(r)].status = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
      }
    }
    if (left > 0 && Clock::now() > deadline) {
      for (int r = 0; r < started; ++r)
        if (!done[size_t(r)]) {
          ::kill(pids[size_t(r)], SIGKILL);
          ::waitpid(pids[size_t(r)], nullptr, 0);
          res[size_t(r)].status = -SIGKILL;
        }
      FAIL("ranks still running after " << limit.count() << " ms: a hang");
    }
    std::this_thread::sleep_for(ms(5));
  }
  for (int r = 0; r < started; ++r) {
    std::ifstream f(dir.path / ("report." + std::to_string(r)));
    std::stringstream ss;
    ss << f.rdbuf();
    res[size_t(r)].out = ss.str();
  }
  return res;
}

inline void require_all_ok(const std::vector<RankResult>& res) {
  for (size_t r = 0; r < res.size(); ++r) {
    INFO("rank " << r << " report:\n" << res[r].out);
    REQUIRE(res[r].status == 0);
  }
}

inline std::unique_ptr<ProcessGroup> gloo_group(Store& store, int rank, int size, ms timeout = ms(20000),
                                                const std::string& prefix = "pg") {
  store.set_timeout(timeout);
  return make_process_group("gloo", store, rank, size, timeout, prefix);
}

}  // namespace fork_ranks
