// The hang watchdog of a data-parallel run ([dist] hang_timeout_s, hang_factor): a thread per rank
// that publishes, once a second, what its rank is doing (the phase: "step 13", "eval after step
// 469", "checkpoint at step 500"; the collective its process group is running, e.g. "allreduce
// (sum) of 4.0 MiB f32, DDP bucket 1 of 2 (tag 40), running for 12.1 s"; the last completed step)
// to the rendezvous store, and watches the phase's time. When a phase has run longer than
// hang_timeout_s (and, for a step, longer than hang_factor times the median step), every rank
// stops: rank 0 prints the report of every rank's last published status with its age, the ranks
// that stopped publishing first (a stopped, dead or cut-off rank's status is stale, not news),
// the others one line,
// and, with a process group that numbers its collectives (NCCL), the rank that never joined the
// collective the others wait in (never_joined.h); each process aborts its process group (NCCL's
// communicator: its kernels would wait for the peer on the GPU forever, and the teardown with
// them) and exits with kHangExitStatus (a stuck collective cannot be interrupted; a
// launcher, ours or another, then sees every rank gone). torch's NCCL watchdog does the same
// with its heartbeat and TORCH_NCCL_DUMP_ON_TIMEOUT.
#pragma once
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include "distributed/process_group.h"
#include "distributed/store.h"

namespace tr::distributed {

inline constexpr int kHangExitStatus = 3;

struct HangWatchdogOptions {
  double timeout_s = 300;  // a phase longer than this is a hang ...
  double factor = 10;      // ... and, for a step, longer than factor x the median step
  std::string key_prefix = "watchdog";
  std::chrono::milliseconds period{1000};  // how often the status is published and the clock checked
  // where this rank is, for the report: its node (-1: not known) and the address peers reach it at
  int node = -1;
  std::string address;
  std::string store_address;  // "host:port" of the store, named when it stops answering
};

class HangWatchdog {
 public:
  // `store`: a connection of the watchdog's own (its thread uses it; its timeout becomes two
  // periods, so that a store that stopped answering delays no decision); `pg`: asked for its activity.
  HangWatchdog(std::unique_ptr<Store> store, ProcessGroup& pg, HangWatchdogOptions o);
  ~HangWatchdog();
  HangWatchdog(const HangWatchdog&) = delete;
  HangWatchdog& operator=(const HangWatchdog&) = delete;

  // A new phase begins now; `step` > 0 marks an optimizer step (its time joins the median when the
  // next phase begins).
  void begin(std::string phase, int64_t step = 0);

  // The report's text from the ranks' published statuses (JSON objects, one per rank, empty where
  // none arrived), for rank 0's message and its test. now_s: rank 0's wall clock (seconds since
  // the epoch), which dates each status (its "time"); stopped[r]: rank r published nothing new
  // while rank 0 watched for a few periods (stopped, dead or cut off), named first as the suspect.
  static std::string report(const std::vector<std::string>& statuses, double timeout_s, const std::string& phase,
                            double now_s, const std::vector<bool>& stopped);

 private:
  void loop();
  std::string status_json();
  void publish();  // this rank's status to the store
  [[noreturn]] void stop_group(const std::string& phase, double elapsed);

  std::unique_ptr<Store> store_;
  ProcessGroup& pg_;  // aborted before the process exits (NCCL: ncclCommAbort)
  HangWatchdogOptions o_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string phase_ = "start-up";
  int64_t step_ = 0, last_done_ = 0, published_ = 0;
  // the last time the store took this rank's status: a rank cut off from the store (or whose
  // store's host is lost) says so when it stops, since rank 0 cannot report for it
  std::chrono::steady_clock::time_point store_answered_ = std::chrono::steady_clock::now();
  std::string store_error_;
  std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
  std::vector<double> step_seconds_;  // the last completed steps' times, for the median
  std::string host_;
  std::thread thread_;
};

}  // namespace tr::distributed
