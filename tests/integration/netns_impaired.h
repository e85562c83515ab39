// Namespace nodes on a bad network (issue 30): as NetnsNodes, but joined through tun_netem, a
// user-space relay that delays and drops packets as `tc ... netem` would (the kernels these tests
// run on have no netem qdisc; tests/tools/tun_netem.cpp says how it works). Also the round-trip
// time between two nodes, measured with TCP connects, to show what the link adds.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>
#include "integration/netns_nodes.h"

extern char** environ;

namespace it {

struct Impairment {
  double delay_ms = 2, jitter_ms = 1, loss = 0.005;
  uint64_t seed = 1;  // the same drops for the same packet order
};

// n nodes, node i at NetnsNodes::address(i) on the TUN device veth[i], each device an end of the
// relay, which runs in the switch namespace. The relay is stopped (and its counts kept in
// relay_out) before the namespaces go, also after a failed REQUIRE. why_not (a skip) where this
// machine cannot have namespaces or TUN devices; failed (a test failure) where the relay, or
// moving its devices, went wrong.
struct ImpairedNodes : NetnsNodes {
  pid_t relay = -1;
  std::string relay_out;  // its output once stopped: per link, forwarded and dropped packets
  std::string failed;     // "" once linked
  const fs::path log = fs::temp_directory_path() / ("trainer_it_relay_" + tag + ".log");

  ImpairedNodes(int n, const Impairment& imp) : NetnsNodes(n, false) {
    if (!why_not.empty()) return;
    if (access("/dev/net/tun", R_OK | W_OK) != 0) {
      why_not = "no usable /dev/net/tun (the relay needs TUN devices)";
      return;
    }
    std::vector<std::string> args = {"ip",
                                     "netns",
                                     "exec",
                                     switch_ns(),
                                     TUN_NETEM_BINARY,
                                     "--delay-ms",
                                     std::to_string(imp.delay_ms),
                                     "--jitter-ms",
                                     std::to_string(imp.jitter_ms),
                                     "--loss",
                                     std::to_string(imp.loss),
                                     "--seed",
                                     std::to_string(imp.seed)};
    for (int i = 0; i < n; ++i) args.push_back(veth[size_t(i)] + "=" + address(i));
    if (!spawn(args)) return;
    // the devices exist once it says so (~20 ms; `ip netns exec` can take seconds while other
    // namespaces change); a relay that failed says why instead
    for (int k = 0; k < 1200 && read(log).find("tun_netem: ready") == std::string::npos; ++k) {
      int st = 0;
      if (waitpid(relay, &st, WNOHANG) == relay) {
        relay = -1;
        failed = "the relay could not start: " + read(log);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    if (read(log).find("tun_netem: ready") == std::string::npos) {
      failed = "the relay did not get ready in 30 s: " + stop();
      return;
    }
    std::string link = "set -e";
    for (int i = 0; i < n; ++i) {
      const std::string& dev = veth[size_t(i)];
      const std::string& node = ns[size_t(i)];
      link += "; ip -n " + switch_ns() + " link set " + dev + " netns " + node + "; ip -n " + node + " addr add " +
              address(i) + "/24 dev " + dev + "; ip -n " + node + " link set " + dev + " up";
    }
    Result r = shell("/", link);
    if (r.code != 0) failed = "cannot move the relay's TUN devices into the nodes: " + r.out;
  }
  ~ImpairedNodes() {
    stop();
    std::error_code ignored;
    fs::remove(log, ignored);
  }

  // SIGTERM, then its output (with the counts); SIGKILL if it has not exited in 5 s
  std::string stop() {
    if (relay < 0) return relay_out;
    kill(relay, SIGTERM);
    int st = 0;
    bool gone = false;
    for (int k = 0; k < 100 && !gone; ++k) {
      gone = waitpid(relay, &st, WNOHANG) == relay;
      if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!gone) {
      kill(relay, SIGKILL);
      waitpid(relay, &st, 0);
    }
    relay = -1;
    relay_out = read(log);
    return relay_out;
  }

 private:
  bool spawn(const std::vector<std::string>& args) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    const int e = posix_spawnp(&relay, "ip", &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e != 0) {
      relay = -1;
      failed = "cannot start the relay: " + std::string(std::strerror(e));
    }
    return e == 0;
  }
};

// `count` TCP connects from node `from` to a closed port of node `to`, each one round trip (SYN,
// then RST): their times in ms, sorted. A lost SYN costs a 1 s retransmit, so take the median.
inline std::vector<double> connect_rtts_ms(const NetnsNodes& net, int from, int to, int count) {
  const std::string probe = "for i in $(seq " + std::to_string(count) + "); do t0=$EPOCHREALTIME; true </dev/tcp/" +
                            NetnsNodes::address(to) + "/9; t1=$EPOCHREALTIME; echo \"$t0 $t1\"; done 2>/dev/null";
  const Result r = shell("/", "timeout 30 ip netns exec " + net.ns[size_t(from)] + " bash -c '" + probe + "'");
  std::vector<double> ms;
  std::istringstream in(r.out);
  double t0 = 0, t1 = 0;
  while (in >> t0 >> t1) ms.push_back((t1 - t0) * 1e3);
  std::sort(ms.begin(), ms.end());
  return ms;
}

}  // namespace it
