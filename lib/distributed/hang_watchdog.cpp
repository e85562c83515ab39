#include "distributed/hang_watchdog.h"
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include "core/error.h"
#include "distributed/never_joined.h"

namespace tr::distributed {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// wall-clock seconds since the epoch: what dates a status across processes and hosts
double wall_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// Set when the watchdog stops the process: the training thread, which the abort may wake, can
// reach exit() before the watchdog's _Exit; the exit status stays the watchdog's.
std::atomic<bool> stopping{false};
void exit_as_hang() {
  if (stopping) std::_Exit(kHangExitStatus);
}

std::string key(const std::string& prefix, int rank) { return str(prefix, "/", rank); }

std::string fixed1(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

}  // namespace

HangWatchdog::HangWatchdog(std::unique_ptr<Store> store, ProcessGroup& pg, HangWatchdogOptions o)
    : store_(std::move(store)), pg_(pg), o_(std::move(o)) {
  [[maybe_unused]] static const bool guarded = std::atexit(exit_as_hang) == 0;
  store_->set_timeout(o_.period * 2);
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  host_ = host;
  // a first status before the first step: a rank cut off or stopped within its first period is then
  // reported as one that stopped publishing, with where it was, not as one that never reported
  publish();
  thread_ = std::thread([this] { loop(); });
}

HangWatchdog::~HangWatchdog() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HangWatchdog::begin(std::string phase, int64_t step) {
  std::lock_guard<std::mutex> g(mu_);
  if (step_ > 0) {  // the step that ends here
    last_done_ = step_;
    step_seconds_.push_back(seconds_since(since_));
    if (step_seconds_.size() > 100) step_seconds_.erase(step_seconds_.begin());
  }
  phase_ = std::move(phase);
  step_ = step;
  since_ = Clock::now();
}

std::string HangWatchdog::status_json() {
  nlohmann::json j;
  {
    std::lock_guard<std::mutex> g(mu_);
    j["phase"] = phase_;
    j["phase_s"] = seconds_since(since_);
    j["last_step"] = last_done_;
    j["seq"] = ++published_;
  }
  j["time"] = wall_now();
  j["rank"] = pg_.rank();
  j["pid"] = int64_t(::getpid());
  j["host"] = host_;
  if (o_.node >= 0) j["node"] = o_.node;
  if (!o_.address.empty()) j["addr"] = o_.address;
  j["collective"] = pg_.activity();
  const ProcessGroup::CollectiveProgress p = pg_.collective_progress();
  if (p.issued) {
    j["issued"] = p.issued;
    j["pending_tag"] = p.pending_tag;
    j["pending"] = p.pending;
  }
  return j.dump();
}

std::string HangWatchdog::report(const std::vector<std::string>& statuses, double timeout_s, const std::string& phase,
                                 double now_s, const std::vector<bool>& stopped) {
  std::string r = str("hang watchdog: '", phase, "' has run for more than hang_timeout_s = ", fixed1(timeout_s), " s");
  std::vector<size_t> order, quiet;  // the ranks that stopped publishing first
  for (size_t i = 0; i < statuses.size(); ++i) (i < stopped.size() && stopped[i] ? quiet : order).push_back(i);
  if (!quiet.empty()) {
    std::string names;
    for (size_t i : quiet) names += str(names.empty() ? "" : ", ", i);
    r += str("; rank", quiet.size() > 1 ? "s " : " ", names,
             " stopped publishing (stopped, dead or cut off): ", quiet.size() > 1 ? "the suspects" : "the suspect");
  }
  const std::string never = describe_never_joined(statuses);
  if (!never.empty()) r += "; " + never;
  r += "; the ranks' last status (each published once a second):";
  order.insert(order.begin(), quiet.begin(), quiet.end());
  for (size_t i : order) {
    if (statuses[i].empty()) {
      r += str("\n  rank ", i, ": no status (its watchdog never reported: it died or is stuck before it started)");
      continue;
    }
    const nlohmann::json j = nlohmann::json::parse(statuses[i]);
    const std::string coll = j.value("collective", "");
    const double age = std::max(0.0, now_s - j.value("time", now_s));
    const bool quiet_rank = i < stopped.size() && stopped[i];
    std::string where = str("pid ", j.value("pid", 0), " on ", j.value("host", "?"));
    if (j.contains("node")) where = str("node ", j.value("node", 0), ", ", where);
    if (j.contains("addr")) where += str(" at ", j.value("addr", ""));
    r += str(
        "\n  rank ", i, " (", where, "): ", quiet_rank ? "STOPPED PUBLISHING; " : "", "status ", fixed1(age),
        " s old: in ", j.value("phase", "?"), " for ", fixed1(j.value("phase_s", 0.0)), " s, last completed step ",
        j.value("last_step", 0), "; ",
        coll.empty() ? std::string("in no collective (computing, or stuck outside the process group)") : "in " + coll);
  }
  return r + str("\n  stopping every rank (exit status ", kHangExitStatus, ")");
}

void HangWatchdog::publish() {
  try {
    const std::string s = status_json();
    store_->set(key(o_.key_prefix + "/status", pg_.rank()), Bytes(s.begin(), s.end()));
    std::lock_guard<std::mutex> g(mu_);
    store_answered_ = Clock::now();
  } catch (const std::exception& e) {
    // the store gone or out of reach: this rank's own clock still decides (loop), and its
    // message says the store stopped answering
    std::lock_guard<std::mutex> g(mu_);
    store_error_ = e.what();
  }
}

void HangWatchdog::stop_group(const std::string& phase, double elapsed) {
  const int rank = pg_.rank(), size = pg_.size();
  if (rank == 0) {
    // every rank's status, read twice a few periods apart: a rank whose status did not move on
    // (its "seq") stopped publishing
    auto read = [&](std::chrono::milliseconds wait) {
      std::vector<std::string> statuses(static_cast<size_t>(size));
      for (int r = 0; r < size; ++r) {
        try {
          store_->wait({key(o_.key_prefix + "/status", r)}, wait);
          const Bytes b = store_->get(key(o_.key_prefix + "/status", r));
          statuses[size_t(r)] = std::string(b.begin(), b.end());
        } catch (...) {}
      }
      return statuses;
    };
    auto seq = [](const std::string& s) {
      if (s.empty()) return int64_t(-1);
      try {
        return nlohmann::json::parse(s).value("seq", int64_t(-1));
      } catch (...) { return int64_t(-1); }
    };
    const std::vector<std::string> first = read(std::chrono::milliseconds(2000));
    std::this_thread::sleep_for(o_.period * 5 / 2);
    std::vector<std::string> statuses = read(std::chrono::milliseconds(100));
    statuses[0] = status_json();  // this rank's, as of now (its thread stopped publishing to report)
    std::vector<bool> stopped(static_cast<size_t>(size), false);
    for (size_t r = 1; r < stopped.size(); ++r)  // rank 0 is this process, publishing until now
      stopped[r] = statuses[r].empty() || seq(statuses[r]) == seq(first[r]);
    std::fprintf(stderr, "error: %s\n", report(statuses, o_.timeout_s, phase, wall_now(), stopped).c_str());
  } else {
    // rank 0 reads every status and reports; wait for it a little so the lines do not interleave,
    // publishing meanwhile, so that rank 0 does not take this rank for one that stopped (not when
    // the store stopped answering: rank 0 cannot read them then)
    const double period_s = std::chrono::duration<double>(o_.period).count();
    auto store_silent_s = [&] {
      std::lock_guard<std::mutex> g(mu_);
      return seconds_since(store_answered_);
    };
    const auto until = Clock::now() + o_.period * 5 / 2 + std::chrono::milliseconds(3000);
    while (Clock::now() < until && store_silent_s() <= 2 * period_s) {
      publish();
      std::this_thread::sleep_for(o_.period);
    }
    const double silent = store_silent_s();
    std::string last_error;
    {
      std::lock_guard<std::mutex> g(mu_);
      last_error = store_error_;
    }
    if (silent > 2 * period_s)
      std::fprintf(stderr,
                   "error: rank %d: the hang watchdog stopped this rank after %.1f s in %s; the store at %s (rank 0's "
                   "node) has not answered for %.1f s, so rank 0 cannot report: this node is cut off from it, or "
                   "that node is lost [%s]\n",
                   rank, elapsed, phase.c_str(), o_.store_address.empty() ? "?" : o_.store_address.c_str(), silent,
                   last_error.c_str());
    else
      std::fprintf(
          stderr,
          "error: rank %d: the hang watchdog stopped this rank after %.1f s in %s (rank 0 reports every rank)\n", rank,
          elapsed, phase.c_str());
  }
  std::fflush(stderr);
  stopping = true;
  pg_.abort(str("the hang watchdog stopped rank ", rank, " in ", phase));
  std::fflush(stderr);
  std::_Exit(kHangExitStatus);
}

void HangWatchdog::loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!cv_.wait_for(l, o_.period, [&] { return stop_; })) {
    const std::string phase = phase_;
    const double elapsed = seconds_since(since_);
    double median = 0;
    if (step_ > 0 && !step_seconds_.empty()) {
      std::vector<double> s = step_seconds_;
      std::nth_element(s.begin(), s.begin() + long(s.size() / 2), s.end());
      median = s[s.size() / 2];
    }
    l.unlock();
    // the verdict before the publish: a store out of reach makes a publish last its timeout
    if (elapsed > o_.timeout_s && elapsed > o_.factor * median) stop_group(phase, elapsed);
    publish();
    l.lock();
  }
}

}  // namespace tr::distributed
