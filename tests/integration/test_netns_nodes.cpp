// Many machines tested as many machines (issue 30): two nodes as two network namespaces joined by
// a veth pair, so each node has its own interfaces and loopback, as two hosts do. Node 0's ranks
// must advertise the veth address, not the 127.0.0.1 that Gloo's default (the machine's name)
// gives where /etc/hosts maps it to loopback. Needs root and `ip`; skipped, visibly, without them.
#include <unistd.h>
#include <chrono>
#include <cstdlib>
#include "integration/cli_harness.h"

using namespace it;

namespace {

// Two namespaces joined by a veth pair (A at 10.213.0.1, B at 10.213.0.2); deleted, with the pair,
// when it goes out of scope, also after a failed REQUIRE. Names carry the pid, so runs side by
// side do not meet (the addresses live inside the namespaces only).
struct NetnsPair {
  const std::string tag = std::to_string(getpid());
  const std::string a = "trainer_it_" + tag + "a", b = "trainer_it_" + tag + "b";
  const std::string va = "trv" + tag + "a", vb = "trv" + tag + "b";  // at most 15 characters
  std::string why_not;  // "" once made

  NetnsPair() {
    if (geteuid() != 0) {
      why_not = "not root (network namespaces need CAP_SYS_ADMIN)";
      return;
    }
    if (shell("/", "command -v ip").code != 0) {
      why_not = "no `ip` command (iproute2)";
      return;
    }
    const std::string make = "set -e; ip netns add " + a + "; ip netns add " + b + "; ip link add " + va +
                             " type veth peer name " + vb + "; ip link set " + va + " netns " + a + "; ip link set " +
                             vb + " netns " + b + "; ip -n " + a + " addr add 10.213.0.1/24 dev " + va + "; ip -n " + b +
                             " addr add 10.213.0.2/24 dev " + vb + "; for n in " + a + " " + b +
                             "; do ip -n $n link set lo up; done; ip -n " + a + " link set " + va + " up; ip -n " + b +
                             " link set " + vb + " up";
    Result r = shell("/", make);
    if (r.code != 0) why_not = "cannot make network namespaces here: " + r.out;
  }
  ~NetnsPair() {
    // a veth pair goes with its namespace; it is deleted by name too in case moving it failed
    shell("/", "ip netns del " + a + "; ip netns del " + b + "; ip link del " + va + "; true");
  }
};

}  // namespace

TEST_CASE("two nodes in two network namespaces (a veth pair) equal --nproc 2 on one host", "[integration][dist][netns]") {
  NetnsPair net;
  if (!net.why_not.empty()) {
    WARN("skipped: " << net.why_not);
    return;
  }
  fs::path d = fresh_dir("netns_nodes");
  const std::string run = "'" TRAINER_BINARY "' run '" + kRepo + "/configs/fmnist_mlp.toml' --set train.steps=30 " +
                          "--set train.log_every=1 --set train.eval_batches=2 --set log.progress=lines " +
                          "--set checkpoint.save_final=false ";
  Result one = shell(d, run + "--set run.name=one --nproc 2");
  INFO(one.out);
  REQUIRE(one.code == 0);
  CHECK_THAT(one.out, Contains("through shared memory"));  // one host: the ranks share a segment

  // node 1 in the background, node 0 (which serves the store) in the foreground, each bounded by
  // `timeout`; the namespaces share /dev/shm and the boot id, but not a network namespace, so the
  // gradients go over the veth as between two hosts
  const auto t0 = std::chrono::steady_clock::now();
  const std::string node = "timeout -k 5 60 ip netns exec ";
  const std::string args = "--set run.name=nodes --nproc 1 --nnodes 2 --master-addr 10.213.0.1 --master-port 29555 ";
  Result r = shell(d, "export TRAINER_STORE_TOKEN=t$$; (" + node + net.b + " " + run + args +
                          "--node-rank 1 > node1.log 2>&1; echo $? > node1.rc) & " + node + net.a + " " + run + args +
                          "--node-rank 0; rc=$?; wait; exit $rc");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string node1 = read(d / "node1.log");
  INFO(r.out << "\nnode 1:\n" << node1 << "\n(" << seconds << " s)");
  REQUIRE(r.code == 0);
  CHECK(read(d / "node1.rc") == "0\n");
  // each node says once which address it chose: its end of the veth, never loopback
  CHECK_THAT(r.out, Contains("gloo: binding 10.213.0.1 (" + net.va + "): the interface that routes to the master"));
  CHECK_THAT(node1, Contains("gloo: binding 10.213.0.2 (" + net.vb + "): the interface that routes to the master"));
  CHECK_THAT(r.out, Contains("gloo over tcp"));

  const std::string m1 = read(d / "runs/one/metrics.jsonl"), m2 = read(d / "runs/nodes/metrics.jsonl");
  for (const char* split : {"train", "eval"}) {
    const std::vector<double> a = metric_values(m1, split, "loss"), b = metric_values(m2, split, "loss");
    REQUIRE(a.size() == (split == std::string("train") ? 30u : 1u));
    REQUIRE(b.size() == a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(split << " line " << i);
      CHECK(b[i] == Approx(a[i]).epsilon(1e-5));
    }
  }
}
