// Nodes as network namespaces for the multi-node tests (issue 30): n namespaces joined by a
// bridge, so each node has its own interfaces and loopback, as separate hosts do; a run of
// `trainer` as n nodes across them; the losses of two runs compared. Needs root and `ip`: where
// they are missing, why_not says so and the tests skip with a WARN.
#pragma once
#include <unistd.h>
#include <string>
#include <vector>
#include "integration/cli_harness.h"

namespace it {

// n namespaces, node i at 10.213.0.<i + 1>, each joined by a veth pair to a bridge in one more
// namespace (the switch); deleted, with the veths, when it goes out of scope, also after a failed
// REQUIRE. Names carry the pid, so runs side by side do not meet (the addresses live inside the
// namespaces only).
struct NetnsNodes {
  const std::string tag = std::to_string(getpid());
  std::vector<std::string> ns, veth;  // node i's namespace and its end of the link
  std::string why_not;                // "" once made

  explicit NetnsNodes(int n) : NetnsNodes(n, true) {}
  ~NetnsNodes() {
    // a veth goes with its namespace; deleted by name too in case moving it failed
    std::string del = "ip netns del " + switch_ns();
    for (size_t i = 0; i < ns.size(); ++i) del += "; ip netns del " + ns[i] + "; ip link del " + veth[i];
    shell("/", del + "; true");
  }
  std::string switch_ns() const { return "trainer_it_" + tag + "_sw"; }
  static std::string address(int i) { return "10.213.0." + std::to_string(i + 1); }

 protected:
  // bridge = false: the namespaces and the switch's, up to their loopback but not linked, for a
  // subclass to link them its own way (ImpairedNodes, netns_impaired.h); veth[i] names node i's
  // end of that link
  NetnsNodes(int n, bool bridge) {
    for (int i = 0; i < n; ++i) {
      ns.push_back("trainer_it_" + tag + "_" + std::to_string(i));
      veth.push_back("v" + tag + "-" + std::to_string(i));  // at most 15 characters
    }
    if (geteuid() != 0) {
      why_not = "not root (network namespaces need CAP_SYS_ADMIN)";
      return;
    }
    if (shell("/", "command -v ip").code != 0) {
      why_not = "no `ip` command (iproute2)";
      return;
    }
    const std::string sw = switch_ns();
    std::string make = "set -e; ip netns add " + sw;
    if (bridge) make += "; ip -n " + sw + " link add br0 type bridge; ip -n " + sw + " link set br0 up";
    for (int i = 0; i < n; ++i) {
      make += "; ip netns add " + ns[size_t(i)] + "; ip -n " + ns[size_t(i)] + " link set lo up";
      if (!bridge) continue;
      const std::string peer = "b" + tag + "-" + std::to_string(i);
      make += "; ip link add " + veth[size_t(i)] + " type veth peer name " + peer + "; ip link set " + veth[size_t(i)] +
              " netns " + ns[size_t(i)] + "; ip link set " + peer + " netns " + sw + "; ip -n " + sw + " link set " +
              peer + " master br0 up; ip -n " + ns[size_t(i)] + " addr add " + address(i) + "/24 dev " +
              veth[size_t(i)] + "; ip -n " + ns[size_t(i)] + " link set " + veth[size_t(i)] + " up";
    }
    Result r = shell("/", make);
    if (r.code != 0) why_not = "cannot make network namespaces here: " + r.out;
  }
};

// `trainer <run>` as node i of the namespaces' nodes, 1 rank each, the master on node 0: node 0's
// output (it serves the store, in the foreground) and every node's exit status; each bounded by
// `timeout`. Node i > 0 writes node<i>.log and node<i>.rc in d.
inline Result run_nodes(const fs::path& d, const NetnsNodes& net, const std::string& run) {
  const int n = int(net.ns.size());
  const std::string node = "timeout -k 5 60 ip netns exec ";
  const std::string args =
      " --nproc 1 --nnodes " + std::to_string(n) + " --master-addr " + NetnsNodes::address(0) + " --master-port 29555";
  // one thread per rank, as the one-host `--nproc n` runs they are compared with have on 2 cores:
  // where the f32 GEMM splits its sums across threads (oneDNN's AVX2 kernels), the thread count
  // moves a loss's last bits, and 30 steps make that more than rtol 1e-5
  std::string cmd = "export TRAINER_STORE_TOKEN=t$$ OMP_NUM_THREADS=1; ";
  for (int i = 1; i < n; ++i) {
    const std::string k = std::to_string(i);
    cmd += "(" + node + net.ns[size_t(i)] + " " + run + args + " --node-rank " + k + " > node" + k +
           ".log 2>&1; echo $? > node" + k + ".rc) & ";
  }
  return shell(d, cmd + node + net.ns[0] + " " + run + args + " --node-rank 0; rc=$?; wait; exit $rc");
}

// the train and eval losses of two metrics files, equal to rtol 1e-5
inline void check_same_losses(const std::string& m1, const std::string& m2, size_t train_lines) {
  for (const char* split : {"train", "eval"}) {
    const std::vector<double> a = metric_values(m1, split, "loss"), b = metric_values(m2, split, "loss");
    REQUIRE(a.size() == (split == std::string("train") ? train_lines : 1u));
    REQUIRE(b.size() == a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(split << " line " << i);
      CHECK(b[i] == Approx(a[i]).epsilon(1e-5));
    }
  }
}

}  // namespace it
