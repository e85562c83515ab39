// The rank launcher: signal plumbing (a self-pipe), spawning (fork/exec with everything prepared
// before fork: the launcher has threads, so the child may only make async-signal-safe calls),
// the supervision loop (output copying, reaping, stopping) and the restart policy.
#include "distributed/launcher.h"
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include "core/error.h"
#include "distributed/node_rendezvous.h"
#include "distributed/tcp_store.h"

extern char** environ;

namespace tr::distributed {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kTailLines = 20;
constexpr size_t kTailLineChars = 2000;
constexpr size_t kMaxPartialLine = 64 * 1024;  // a longer line without '\n' is passed on in pieces

// ---- signals --------------------------------------------------------------------------------

std::atomic<bool> g_active{false};
int g_sig_write = -1;

extern "C" void on_launcher_signal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t r = ::write(g_sig_write, &b, 1);  // a full pipe drops the byte: the loop polls anyway
  (void)r;
  errno = saved;
}

// For the duration of launch(): SIGINT/SIGTERM/SIGCHLD become bytes on a pipe that the
// supervision loop polls, and SIGPIPE is ignored (a closed stdout must not kill the launcher
// while it still has ranks to stop). The previous dispositions are restored afterwards.
class SignalScope {
 public:
  SignalScope() {
    TR_CHECK(!g_active.exchange(true), "launch: another launch() is already running in this process");
    if (::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
      g_active = false;
      throw Error(str("launch: pipe2 failed: ", std::strerror(errno)));
    }
    g_sig_write = fds_[1];
    struct sigaction sa {};
    sa.sa_handler = on_launcher_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ign, &old_[3]);
  }
  ~SignalScope() {
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
    ::sigaction(SIGPIPE, &old_[3], nullptr);
    g_sig_write = -1;
    ::close(fds_[0]);
    ::close(fds_[1]);
    g_active = false;
  }
  int read_fd() const { return fds_[0]; }
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGCHLD};

 private:
  int fds_[2] = {-1, -1};
  struct sigaction old_[4];
};

// ---- small helpers --------------------------------------------------------------------------

void write_all(int fd, const std::string& s) {
  const char* p = s.data();
  size_t n = s.size();
  while (n > 0) {
    ssize_t r = ::write(fd, p, n);
    if (r > 0) {
      p += r;
      n -= size_t(r);
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else if (r < 0 && errno == EAGAIN) {
      pollfd pfd{fd, POLLOUT, 0};
      ::poll(&pfd, 1, 100);
    } else {
      return;  // EPIPE and the like: the reader is gone; supervising the ranks still matters
    }
  }
}

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? str("SIG", abbrev) : str("signal ", sig);
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

std::string describe(int status) {
  if (WIFEXITED(status)) return str("exit status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return str("killed by signal ", WTERMSIG(status), " (", signal_name(WTERMSIG(status)), ")");
  return str("wait status ", status);
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

int usable_cores() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));  // honours cpusets
  return int(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
}

std::string random_token() {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t r = ::getrandom(b + got, sizeof b - got, 0);
    TR_CHECK(r > 0 || errno == EINTR, "launch: getrandom failed: ", std::strerror(errno));
    if (r > 0) got += size_t(r);
  }
  static const char* hex = "0123456789abcdef";
  std::string t;
  for (unsigned char c : b) {
    t.push_back(hex[c >> 4]);
    t.push_back(hex[c & 15]);
  }
  return t;
}

bool has_resume_flag(const std::vector<std::string>& argv) {
  for (size_t i = 1; i < argv.size(); ++i)
    if (argv[i] == "--resume" || argv[i].rfind("--resume=", 0) == 0) return true;
  return false;
}

// ---- ranks ----------------------------------------------------------------------------------

// One output pipe of a rank, copied line by line to a launcher fd.
struct Stream {
  int fd = -1;  // read end; -1 when closed (or when the rank writes to the launcher's fd itself)
  int dest = -1;
  std::string prefix;
  std::string partial;
  std::deque<std::string>* tail = nullptr;

  void emit(const std::string& line) {
    write_all(dest, prefix + line + "\n");
    if (tail) {
      tail->push_back(line.size() > kTailLineChars ? line.substr(0, kTailLineChars) + " ..." : line);
      if (tail->size() > kTailLines) tail->pop_front();
    }
  }
  void on_data(const char* p, size_t n) {
    partial.append(p, n);
    size_t start = 0;
    for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1)
      emit(partial.substr(start, nl - start));
    partial.erase(0, start);
    if (partial.size() > kMaxPartialLine) {
      emit(partial);
      partial.clear();
    }
  }
  void close_stream() {
    if (!partial.empty()) emit(partial);
    partial.clear();
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  // Reads what is there; closes on end of file.
  void pump() {
    char buf[65536];
    while (fd >= 0) {
      ssize_t r = ::read(fd, buf, sizeof buf);
      if (r > 0) {
        on_data(buf, size_t(r));
        if (size_t(r) < sizeof buf) return;
      } else if (r < 0 && errno == EINTR) {
        continue;
      } else if (r < 0 && errno == EAGAIN) {
        return;
      } else {
        close_stream();
      }
    }
  }
};

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  bool killed_by_us = false;  // SIGKILLed after the grace period
  int status = 0;             // wait status once reaped
  Stream out, err;
  std::deque<std::string> tail;
};

// Everything a child needs, built before fork (after fork only async-signal-safe calls).
struct ExecPlan {
  std::string executable;
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::vector<char*> argv_p, env_p;
  std::string exec_error;  // written if execve fails

  void freeze() {
    for (auto& a : argv) argv_p.push_back(a.data());
    argv_p.push_back(nullptr);
    for (auto& e : env) env_p.push_back(e.data());
    env_p.push_back(nullptr);
    exec_error = str("trainer launch: cannot execute ", executable, ": ");
  }
};

std::vector<std::string> child_env(const std::vector<std::pair<std::string, std::string>>& set) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    std::string key = kv.substr(0, kv.find('='));
    bool replaced = false;
    for (const auto& [k, v] : set) replaced |= (k == key);
    if (!replaced) env.push_back(std::move(kv));
  }
  for (const auto& [k, v] : set) env.push_back(k + "=" + v);
  return env;
}

// Forks and execs one rank. Throws (with nothing left running from this call) when it cannot.
void spawn(Rank& r, ExecPlan& plan, bool own_stdout, int out_fd, int err_fd, int devnull) {
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if ((!own_stdout && ::pipe2(out_pipe, O_CLOEXEC) != 0) || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    int e = errno;
    for (int fd : {out_pipe[0], out_pipe[1]})
      if (fd >= 0) ::close(fd);
    throw Error(str("launch: cannot create the output pipes of rank ", r.rank, ": ", std::strerror(e)));
  }
  pid_t parent = ::getpid();
  // Blocked across fork so that no handler of ours runs in the child before exec resets it.
  sigset_t block, old;
  sigemptyset(&block);
  for (int s : SignalScope::kSignals) sigaddset(&block, s);
  ::pthread_sigmask(SIG_BLOCK, &block, &old);
  pid_t pid = ::fork();
  if (pid == 0) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int s : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE}) ::sigaction(s, &dfl, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(128 + SIGKILL);  // the launcher died before prctl
    ::setpgid(0, 0);
    ::dup2(devnull, 0);
    ::dup2(own_stdout ? out_fd : out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    ::close_range(3, ~0U, 0);  // no launcher socket or other rank's pipe leaks into a rank
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(plan.executable.c_str(), plan.argv_p.data(), plan.env_p.data());
    int e = errno;
    const char* why = ::strerrordesc_np(e);
    ssize_t w = ::write(2, plan.exec_error.data(), plan.exec_error.size());
    w = ::write(2, why ? why : "unknown error", std::strlen(why ? why : "unknown error"));
    w = ::write(2, "\n", 1);
    (void)w;
    ::_exit(127);
  }
  int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (out_pipe[1] >= 0) ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (pid < 0) {
    if (out_pipe[0] >= 0) ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    throw Error(str("launch: cannot fork rank ", r.rank, ": ", std::strerror(fork_errno)));
  }
  ::setpgid(pid, pid);  // also here, so that signalling the group cannot race the child's own call
  r.pid = pid;
  r.running = true;
  std::string prefix = str("[rank ", r.rank, "] ");
  r.out = Stream{out_pipe[0], out_fd, prefix, {}, nullptr};
  r.err = Stream{err_pipe[0], err_fd, prefix, {}, &r.tail};
  for (int fd : {out_pipe[0], err_pipe[0]})
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void signal_group(const Rank& r, int sig) {
  if (r.running) ::kill(-r.pid, sig);
}

// Reaps a rank if it exited. Its process group is SIGKILLed first, while the zombie still holds
// the group id (so the id cannot have been reused): helpers it left behind die with it.
bool try_reap(Rank& r) {
  siginfo_t si{};
  if (::waitid(P_PID, id_t(r.pid), &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid != r.pid) return false;
  ::kill(-r.pid, SIGKILL);
  int status = 0;
  while (::waitpid(r.pid, &status, 0) < 0 && errno == EINTR) {}
  r.status = status;
  r.running = false;
  return true;
}

bool succeeded(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

// How a rank ended after the user's signal `sig` was forwarded to it: a stop, not a failure.
bool stopped_by(int status, int sig) {
  if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM;
  if (!WIFEXITED(status)) return false;
  int c = WEXITSTATUS(status);
  return c == 0 || c == 128 + SIGINT || c == 128 + SIGTERM || c == 128 + sig;
}

struct GroupResult {
  int code = 0;
  bool failed = false;     // a rank failed: eligible for a restart
  bool user_stop = false;  // the user's SIGINT/SIGTERM: never restarted
};

struct Group {
  const LaunchOptions& opts;
  int sig_fd;
  std::vector<Rank> ranks;
  // Asked about once a second while the ranks run: true when the round failed on another node,
  // whose ranks this node's may not notice soon (a cut-off peer); the ranks are then stopped.
  std::function<bool()> failed_elsewhere;

  // Supervises the running ranks until all are reaped; returns the outcome.
  GroupResult supervise();

  // Stops and reaps whatever was started when spawning the group failed half-way.
  void abort_spawn() {
    for (auto& r : ranks) signal_group(r, SIGKILL);
    for (auto& r : ranks)
      if (r.running) {
        int st;
        while (::waitpid(r.pid, &st, 0) < 0 && errno == EINTR) {}
        r.running = false;
      }
    for (auto& r : ranks) r.out.close_stream(), r.err.close_stream();
  }
};

// One group's supervision loop: copies the ranks' output, forwards the user's signals, reaps the
// ranks, and on the first failure (here or on another node) stops the others: SIGTERM, then
// SIGKILL after the grace period.
class Supervision {
 public:
  explicit Supervision(Group& g)
      : g_(g), grace_(std::chrono::duration_cast<milliseconds>(std::chrono::duration<double>(g.opts.grace_seconds))) {}

  GroupResult run() {
    while (!finished()) {
      wait_and_copy_output();
      reap_exited_ranks();
      ask_other_nodes();
      kill_after_grace_period();
    }
    return outcome();
  }

 private:
  void begin_stop(int sig) {
    for (auto& r : g_.ranks) signal_group(r, sig);
    if (!kill_at_) kill_at_ = Clock::now() + grace_;
  }

  // True once every rank is reaped and its pipes closed.
  bool finished() {
    bool any_open = false;
    any_running_ = false;
    for (auto& r : g_.ranks) {
      any_running_ |= r.running;
      any_open |= r.out.fd >= 0 || r.err.fd >= 0;
    }
    if (!any_running_ && !any_open) return true;
    if (!any_running_) {
      // All reaped; a pipe still open is held by something that escaped the rank's group.
      // Take what it wrote for a moment, then stop listening.
      if (!drain_until_) drain_until_ = Clock::now() + milliseconds(500);
      if (Clock::now() >= *drain_until_) {
        for (auto& r : g_.ranks) r.out.close_stream(), r.err.close_stream();
        return true;
      }
    }
    return false;
  }

  // Polls the signal pipe and the ranks' output until something arrives or a deadline is due.
  void wait_and_copy_output() {
    std::vector<pollfd> pfds{{g_.sig_fd, POLLIN, 0}};
    std::vector<Stream*> streams;
    for (auto& r : g_.ranks)
      for (Stream* s : {&r.out, &r.err})
        if (s->fd >= 0) {
          pfds.push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
        }
    // SIGCHLD wakes us; the timeout is a safety net (a byte lost to a full pipe) and the deadlines.
    auto wake = Clock::now() + milliseconds(250);
    if (kill_at_ && !kill_sent_) wake = std::min(wake, *kill_at_);
    if (drain_until_) wake = std::min(wake, *drain_until_);
    int timeout = int(std::max<int64_t>(0, std::chrono::ceil<milliseconds>(wake - Clock::now()).count()));
    int n = ::poll(pfds.data(), nfds_t(pfds.size()), timeout);
    if (n < 0 && errno != EINTR) throw Error(str("launch: poll failed: ", std::strerror(errno)));
    if (n > 0 && pfds[0].revents) forward_user_signals();
    for (size_t i = 1; n > 0 && i < pfds.size(); ++i)
      if (pfds[i].revents) streams[i - 1]->pump();
  }

  void forward_user_signals() {
    unsigned char sigs[64];
    ssize_t k;
    while ((k = ::read(g_.sig_fd, sigs, sizeof sigs)) > 0)
      for (ssize_t i = 0; i < k; ++i)
        if (sigs[i] == SIGINT || sigs[i] == SIGTERM) {
          user_sig_ = sigs[i];
          begin_stop(user_sig_);  // every signal is forwarded: a second Ctrl-C reaches the ranks too
        }
  }

  // Failures reaped in the same pass happened at about the same time; the order of death is
  // lost, so the one killed by a signal is named first: when a rank is killed (OOM, kill -9),
  // its peers notice the broken connection and exit with an error right after, and it is the
  // killed one that the summary should blame.
  void reap_exited_ranks() {
    int pass_failed = -1;
    for (size_t i = 0; i < g_.ranks.size(); ++i) {
      Rank& r = g_.ranks[i];
      if (!r.running || !try_reap(r)) continue;
      bool failure = !succeeded(r.status) && !r.killed_by_us && !(user_sig_ && stopped_by(r.status, user_sig_)) &&
                     !(elsewhere_ && stopped_by(r.status, SIGTERM));
      if (failure && (pass_failed < 0 || (WIFSIGNALED(r.status) && !WIFSIGNALED(g_.ranks[size_t(pass_failed)].status))))
        pass_failed = int(i);
    }
    if (pass_failed >= 0 && first_failed_ < 0) {
      first_failed_ = pass_failed;
      failed_after_ = std::chrono::duration<double>(Clock::now() - t0_).count();
      begin_stop(SIGTERM);
    }
  }

  void ask_other_nodes() {
    if (g_.failed_elsewhere && first_failed_ < 0 && !user_sig_ && !elsewhere_ && any_running_ &&
        Clock::now() - asked_at_ >= milliseconds(1000)) {
      asked_at_ = Clock::now();
      if (g_.failed_elsewhere()) {
        elsewhere_ = true;
        begin_stop(SIGTERM);
      }
    }
  }

  void kill_after_grace_period() {
    if (!kill_at_ || kill_sent_ || Clock::now() < *kill_at_) return;
    for (auto& r : g_.ranks)
      if (r.running) {
        signal_group(r, SIGKILL);
        r.killed_by_us = true;
      }
    kill_sent_ = true;
  }

  // The exit code, and the summary line on the launcher's stderr.
  GroupResult outcome() const {
    int n_killed = 0;
    for (auto& r : g_.ranks) n_killed += r.killed_by_us;
    const std::string killed_note = n_killed ? str(" (", n_killed, n_killed == 1 ? " rank" : " ranks",
                                                   " killed after the ", g_.opts.grace_seconds, " s grace period)")
                                             : "";
    GroupResult res;
    if (first_failed_ >= 0) {
      const Rank& f = g_.ranks[size_t(first_failed_)];
      write_all(g_.opts.err_fd, failure_summary(f, killed_note));
      res.code = exit_code(f.status);
      if (res.code == 0) res.code = 1;
      res.failed = true;
    } else if (elsewhere_) {
      write_all(g_.opts.err_fd,
                str("trainer launch: node ", g_.opts.node_rank, ": the round failed on another node; stopped ",
                    "this node's ", g_.ranks.size(), g_.ranks.size() == 1 ? " rank" : " ranks", killed_note, "\n"));
      res.code = 1;
      res.failed = true;
    } else if (user_sig_) {
      write_all(g_.opts.err_fd, str("trainer launch: stopped by ", signal_name(user_sig_), killed_note, "\n"));
      res.code = 128 + user_sig_;
      res.user_stop = true;
    } else if (n_killed) {  // cannot happen without a stop; kept so an odd path is never a silent 0
      res.code = 1;
      res.failed = true;
    }
    return res;
  }

  // Which rank failed, how and when, and the last lines of its stderr.
  std::string failure_summary(const Rank& f, const std::string& killed_note) const {
    size_t others = g_.ranks.size() - 1;
    std::string msg = str("trainer launch: rank ", f.rank, " (pid ", f.pid, ") failed after ", seconds(failed_after_),
                          " s with ", describe(f.status));
    if (others) msg += str("; stopped the other ", others, others == 1 ? " rank" : " ranks", killed_note);
    if (f.tail.empty()) {
      msg += ". It wrote nothing to stderr.\n";
    } else {
      msg += str(". Last ", f.tail.size(), " lines of its stderr:\n");
      for (const auto& l : f.tail) msg += "    " + l + "\n";
    }
    return msg;
  }

  Group& g_;
  const milliseconds grace_;
  const Clock::time_point t0_ = Clock::now();
  int first_failed_ = -1;  // index in g_.ranks of the rank whose failure is reported
  double failed_after_ = 0;
  int user_sig_ = 0;
  std::optional<Clock::time_point> kill_at_, drain_until_;
  bool kill_sent_ = false, elsewhere_ = false;
  bool any_running_ = false;  // as of this turn's start
  Clock::time_point asked_at_ = Clock::now();
};

GroupResult Group::supervise() { return Supervision(*this).run(); }

void validate(const LaunchOptions& o) {
  TR_CHECK(o.nproc >= 1, "launch: --nproc must be at least 1, got ", o.nproc);
  TR_CHECK(o.nnodes >= 1, "launch: --nnodes must be at least 1, got ", o.nnodes);
  TR_CHECK(o.node_rank >= 0 && o.node_rank < o.nnodes, "launch: --node-rank ", o.node_rank, " must be in [0, --nnodes ",
           o.nnodes, ")");
  TR_CHECK(o.master_port >= 0 && o.master_port <= 65535, "launch: --master-port ", o.master_port, " is out of range");
  TR_CHECK(o.max_restarts >= 0, "launch: --max-restarts must be >= 0, got ", o.max_restarts);
  TR_CHECK(o.grace_seconds >= 0, "launch: the grace period must be >= 0 s, got ", o.grace_seconds);
  TR_CHECK(!o.argv.empty(), "launch: the ranks' argv is empty");
  if (o.nnodes > 1) {
    TR_CHECK(o.master_port != 0, "launch: --nnodes ", o.nnodes,
             " needs a fixed --master-port (the other nodes cannot learn a free one)");
    TR_CHECK(!o.master_addr.empty(), "launch: --nnodes ", o.nnodes, " needs --master-addr (node 0's address)");
    const char* t = std::getenv("TRAINER_STORE_TOKEN");
    TR_CHECK(t && *t, "launch: --nnodes ", o.nnodes,
             " needs TRAINER_STORE_TOKEN set to the same secret in the environment of every node's launcher");
    TR_CHECK(o.join_timeout_s > 0, "launch: the join timeout must be > 0 s, got ", o.join_timeout_s);
  }
}

// What every rank of the job is told: where the store is and its token.
struct Job {
  std::string token;
  std::string master_addr;
  int master_port = 0;
  int world = 0;
  std::string omp_threads;  // "" when the user set OMP_NUM_THREADS (the ranks inherit it)
};

// Every rank's program, arguments and environment (torchrun's variables) for one round.
std::vector<ExecPlan> exec_plans(const LaunchOptions& o, const Job& job, int restart) {
  std::vector<std::string> argv = o.argv;
  if (restart > 0 && !has_resume_flag(argv)) argv.insert(argv.end(), {"--resume", "auto"});
  std::vector<ExecPlan> plans(size_t(o.nproc));
  for (int lr = 0; lr < o.nproc; ++lr) {
    const int rank = o.node_rank * o.nproc + lr;
    std::vector<std::pair<std::string, std::string>> vars = {
        {"RANK", std::to_string(rank)},
        {"LOCAL_RANK", std::to_string(lr)},
        {"WORLD_SIZE", std::to_string(job.world)},
        {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
        {"GROUP_RANK", std::to_string(o.node_rank)},
        {"MASTER_ADDR", job.master_addr},
        {"MASTER_PORT", std::to_string(job.master_port)},
        {"TRAINER_STORE_TOKEN", job.token},
        {"TRAINER_STORE_HOSTED_BY_LAUNCHER", "1"},
        {"TRAINER_RESTART_COUNT", std::to_string(restart)},
    };
    if (!job.omp_threads.empty()) vars.push_back({"OMP_NUM_THREADS", job.omp_threads});
    if (!o.bind_addr.empty()) vars.push_back({"TRAINER_BIND_ADDR", o.bind_addr});
    ExecPlan& p = plans[size_t(lr)];
    p.executable = o.executable;
    p.argv = argv;
    p.env = child_env(vars);
    p.freeze();
  }
  return plans;
}

// Starts the group's ranks (rank 0 writes to the launcher's stdout itself); on a failure, stops
// those already started and rethrows.
void spawn_ranks(Group& g, const LaunchOptions& o, std::vector<ExecPlan>& plans, int devnull) {
  g.ranks.resize(size_t(o.nproc));
  for (int lr = 0; lr < o.nproc; ++lr) g.ranks[size_t(lr)].rank = o.node_rank * o.nproc + lr;
  try {
    for (int lr = 0; lr < o.nproc; ++lr) {
      Rank& r = g.ranks[size_t(lr)];
      spawn(r, plans[size_t(lr)], r.rank == 0, o.out_fd, o.err_fd, devnull);
    }
  } catch (...) {
    g.abort_spawn();
    throw;
  }
}

// Several nodes: joins the launchers' rounds (node_rendezvous.h) through node 0's store; `restart`
// becomes the job's current round (a node that joins late resumes from the newest checkpoint).
std::unique_ptr<NodeRendezvous> join_other_nodes(const LaunchOptions& o, const Job& job, int& restart) {
  const auto join = std::chrono::duration_cast<milliseconds>(std::chrono::duration<double>(o.join_timeout_s));
  auto store = std::make_unique<TCPStore>(job.master_addr, job.master_port, job.token, join);
  store->set_timeout(milliseconds(2000));  // polled by the supervision loop: never long
  const std::string at = store->address();
  auto nodes = std::make_unique<NodeRendezvous>(std::move(store), at, o.node_rank, o.nnodes, join);
  restart = nodes->first_round();
  TR_CHECK(restart <= o.max_restarts, "launch: node ", o.node_rank, " cannot join: the job is at round ", restart,
           ", past its --max-restarts ", o.max_restarts);
  if (restart > 0)
    write_all(o.err_fd, str("trainer launch: node ", o.node_rank, " joins the job at round ", restart,
                            " (resuming from the newest checkpoint)\n"));
  return nodes;
}

// After a round: the launch's exit code, or nothing when the ranks are to be restarted. With
// several nodes, the launchers tell each other how the round ended.
std::optional<int> end_of_round(const LaunchOptions& o, NodeRendezvous* nodes, bool serves_store, int restart,
                                const GroupResult& res) {
  if (nodes && !res.failed && res.code == 0) nodes->done();
  if (nodes && res.failed) {
    try {
      nodes->fail(restart);
    } catch (const Error&) {
      if (restart >= o.max_restarts) return res.code;  // no restart to agree on: the ranks' summary stands
      throw;
    }
  }
  if (!res.failed || restart >= o.max_restarts || (nodes && nodes->any_done())) {
    // the store goes with node 0's launcher: the other nodes learn of the failure first
    if (nodes && res.failed && serves_store)
      nodes->wait_until_seen(restart, milliseconds(3000));  // they ask once a second
    return res.code;
  }
  return std::nullopt;
}

}  // namespace

int launch(const LaunchOptions& o) {
  validate(o);
  SignalScope signals;

  const bool single_node = o.nnodes == 1;
  Job job;
  const char* user_token = std::getenv("TRAINER_STORE_TOKEN");
  job.token = user_token && *user_token ? std::string(user_token) : random_token();
  job.master_addr = single_node ? "127.0.0.1" : o.master_addr;
  std::unique_ptr<TCPStoreServer> server;
  if (o.node_rank == 0) server = std::make_unique<TCPStoreServer>(job.master_addr, o.master_port, job.token);
  job.master_port = server ? server->port() : o.master_port;
  if (!std::getenv("OMP_NUM_THREADS")) job.omp_threads = std::to_string(std::max(1, usable_cores() / o.nproc));
  job.world = o.nproc * o.nnodes;

  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  TR_CHECK(devnull >= 0, "launch: cannot open /dev/null: ", std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } devnull_closer{devnull};

  // several nodes: the launchers agree on each round; one node: a restart clears the store it serves
  int restart = 0;
  std::unique_ptr<NodeRendezvous> nodes = single_node ? nullptr : join_other_nodes(o, job, restart);
  for (;; ++restart) {
    if (nodes)
      nodes->join(restart);
    else if (restart > 0 && server)
      server->clear();  // the new group rendezvouses from scratch

    std::vector<ExecPlan> plans = exec_plans(o, job, restart);
    Group g{o, signals.read_fd(), {}, {}};
    spawn_ranks(g, o, plans, devnull);
    if (nodes) g.failed_elsewhere = [&nodes, restart] { return nodes->failed(restart); };
    const GroupResult res = g.supervise();
    if (std::optional<int> code = end_of_round(o, nodes.get(), server != nullptr, restart, res)) return *code;
    write_all(o.err_fd, str("trainer launch: restarting all ", o.nproc, o.nproc == 1 ? " rank" : " ranks", " (restart ",
                            restart + 1, " of ", o.max_restarts, ")\n"));
  }
}

}  // namespace tr::distributed
