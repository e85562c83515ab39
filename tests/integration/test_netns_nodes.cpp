// Many machines tested as many machines (issue 30): nodes as network namespaces joined by a bridge,
// so each node has its own interfaces and loopback, as separate hosts do. Node 0's ranks
// must advertise the veth address, not the 127.0.0.1 that Gloo's default (the machine's name)
// gives where /etc/hosts maps it to loopback. Needs root and `ip`; skipped, visibly, without them.
#include <unistd.h>
#include <chrono>
#include <sstream>
#include <cstdlib>
#include "integration/netns_nodes.h"

namespace test_netns_nodes {

using namespace it;

namespace {

const std::string kRun = "'" TRAINER_BINARY "' run '" + kRepo + "/configs/fmnist_mlp.toml' --set train.steps=30 " +
                         "--set train.log_every=1 --set train.eval_batches=2 --set log.progress=lines " +
                         "--set checkpoint.save_final=false";

// Two nodes training for long; once both run, `lose` (a shell command) loses one. Returns how many
// seconds after the loss each node's launcher exited (-1: still running after 60 s, then killed)
// and its exit status; node<i>.log in d has its output.
struct Lost {
  double after_s[2] = {-1, -1};
  int code[2] = {-1, -1};
  std::string log[2];
  std::string left;  // processes still in the namespaces afterwards
};
Lost lose_node(const fs::path& d, const NetnsNodes& net, double hang_timeout_s, const std::string& lose) {
  const std::string run = kRun + " --set train.steps=100000 --set train.log_every=20 --set dist.timeout_s=60" +
                          " --set dist.hang_timeout_s=" + std::to_string(hang_timeout_s) +
                          " --nproc 1 --nnodes 2 --master-addr " + NetnsNodes::address(0) + " --master-port 29555";
  std::string cmd = "export TRAINER_STORE_TOKEN=t$$; now() { date +%s.%N; }; ";
  for (int i = 0; i < 2; ++i)
    cmd += "(timeout -k 5 90 ip netns exec " + net.ns[size_t(i)] + " " + run + " --node-rank " + std::to_string(i) +
           " > node" + std::to_string(i) + ".log 2>&1; echo \"$? $(now)\" > node" + std::to_string(i) + ".end) & ";
  // both train (past the first train line, where rank 0 alone measures the matmul peak), then the loss
  cmd += "for i in $(seq 300); do grep -q 'step 60/' node0.log && break; sleep 0.2; done; now > lost_at; " + lose +
         "; wait; ip netns pids " + net.ns[0] + "; ip netns pids " + net.ns[1];
  const Result r = shell(d, cmd);
  Lost out;
  out.left = r.out;
  const double lost_at = std::stod(read(d / "lost_at"));
  for (int i = 0; i < 2; ++i) {
    out.log[i] = read(d / ("node" + std::to_string(i) + ".log"));
    std::istringstream end(read(d / ("node" + std::to_string(i) + ".end")));
    double at = 0;
    if (end >> out.code[i] >> at) out.after_s[i] = out.code[i] == 124 ? -1 : at - lost_at;
  }
  return out;
}

}  // namespace

TEST_CASE("two nodes in two network namespaces equal --nproc 2 on one host", "[integration][dist][netns]") {
  NetnsNodes net(2);
  if (!net.why_not.empty()) {
    WARN("skipped: " << net.why_not);
    return;
  }
  fs::path d = fresh_dir("netns_nodes");
  Result one = shell(d, kRun + " --set run.name=one --nproc 2");
  INFO(one.out);
  REQUIRE(one.code == 0);
  CHECK_THAT(one.out, Contains("through shared memory"));  // one host: the ranks share a segment

  // the namespaces share /dev/shm and the boot id, but not a network namespace, so the gradients
  // go over the link as between two hosts
  const auto t0 = std::chrono::steady_clock::now();
  Result r = run_nodes(d, net, kRun + " --set run.name=nodes");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string node1 = read(d / "node1.log");
  INFO(r.out << "\nnode 1:\n" << node1 << "\n(" << seconds << " s)");
  REQUIRE(r.code == 0);
  CHECK(read(d / "node1.rc") == "0\n");
  // each node says once which address it chose: its end of the link, never loopback
  CHECK_THAT(r.out,
             Contains("gloo: binding 10.213.0.1 (" + net.veth[0] + "): the interface that routes to the master"));
  CHECK_THAT(node1,
             Contains("gloo: binding 10.213.0.2 (" + net.veth[1] + "): the interface that routes to the master"));
  CHECK_THAT(r.out, Contains("gloo over tcp"));
  check_same_losses(read(d / "runs/one/metrics.jsonl"), read(d / "runs/nodes/metrics.jsonl"), 30);
}

TEST_CASE("three nodes in three network namespaces equal --nproc 3 on one host", "[integration][dist][netns]") {
  NetnsNodes net(3);
  if (!net.why_not.empty()) {
    WARN("skipped: " << net.why_not);
    return;
  }
  fs::path d = fresh_dir("netns_nodes3");
  const std::string run = kRun + " --set data.batch_size=96 --set data.eval_batch_size=999";  // divisible by 3
  Result one = shell(d, run + " --set run.name=one --nproc 3");
  INFO(one.out);
  REQUIRE(one.code == 0);
  Result r = run_nodes(d, net, run + " --set run.name=nodes");
  INFO(r.out << "\nnode 1:\n" << read(d / "node1.log") << "\nnode 2:\n" << read(d / "node2.log"));
  REQUIRE(r.code == 0);
  CHECK(read(d / "node1.rc") == "0\n");
  CHECK(read(d / "node2.rc") == "0\n");
  CHECK_THAT(r.out, Contains("3 ranks (gloo over tcp)"));
  check_same_losses(read(d / "runs/one/metrics.jsonl"), read(d / "runs/nodes/metrics.jsonl"), 30);
}

// A lost node (issue 30): every survivor exits by itself, soon, naming the node it lost, and
// nothing is left running. hang_timeout_s = 10: a cut-off peer is found by the watchdog (its
// report takes 2.5 s more to tell a stopped rank from a busy one); a killed one at once, by its
// closed connections.
TEST_CASE("a lost node: survivors exit soon, naming it, nothing left running", "[integration][dist][netns]") {
  NetnsNodes net(2);
  if (!net.why_not.empty()) {
    WARN("skipped: " << net.why_not);
    return;
  }
  fs::path d = fresh_dir("netns_lost");
  const double hang = 10;
  SECTION("node 1 killed (every process of its namespace)") {
    const Lost l = lose_node(d, net, hang, "ip netns pids " + net.ns[1] + " | xargs -r kill -9");
    INFO(l.log[0] << "\nnode 1:\n" << l.log[1]);
    CHECK(l.after_s[0] >= 0);
    CHECK(l.after_s[0] < 5);
    CHECK(l.code[0] == 1);
    CHECK_THAT(l.log[0], Contains("rank 1 (node 1 at [10.213.0.2]:"));
    CHECK(l.left.empty());
  }
  SECTION("node 1's link down: both sides give up within hang_timeout_s + 8 s") {
    const Lost l = lose_node(d, net, hang, "ip -n " + net.ns[1] + " link set " + net.veth[1] + " down");
    INFO(l.log[0] << "\nnode 1:\n" << l.log[1]);
    for (int i = 0; i < 2; ++i) {
      CHECK(l.code[i] == 3);  // the watchdog's status on both sides of the cut
      CHECK(l.after_s[i] >= hang);
      // ~3.5 s past hang_timeout_s on an idle machine (the report's reads, a publish's timeout), on
      // node 0 up to 3 s more (its store waits for the other nodes to hear of the failure)
      CHECK(l.after_s[i] < hang + 10);
    }
    CHECK_THAT(l.log[0], Contains("rank 1 stopped publishing (stopped, dead or cut off): the suspect"));
    CHECK_THAT(l.log[0], Contains("rank 1 (node 1, pid") && Contains("at 10.213.0.2): STOPPED PUBLISHING"));
    CHECK_THAT(l.log[1], Contains("the store at 10.213.0.1:29555 (rank 0's node) has not answered for"));
    CHECK(l.left.empty());
  }
  SECTION("node 0, the store's host, killed: node 1 names it and exits") {
    const Lost l = lose_node(d, net, hang, "ip netns pids " + net.ns[0] + " | xargs -r kill -9");
    INFO(l.log[1]);
    CHECK(l.after_s[1] >= 0);
    CHECK(l.after_s[1] < 5);
    CHECK(l.code[1] == 1);
    CHECK_THAT(l.log[1], Contains("rank 0 (node 0 at [10.213.0.1]:"));
    CHECK(l.left.empty());
  }
}

// --max-restarts across nodes (issue 30): node 1 lost (every process of its namespace killed,
// once during a step and once during node 0's background checkpoint write) and started again by
// hand, as an operator would: node 0's launcher leaves the failed round, node 1's new launcher
// joins the next, the ranks resume from the newest complete checkpoint, and the final weights and
// optimizer state are byte for byte those of the run that lost nothing.
TEST_CASE("a lost node back: --max-restarts resumes every node, same final bytes", "[integration][dist][netns]") {
  NetnsNodes net(2);
  if (!net.why_not.empty()) {
    WARN("skipped: " << net.why_not);
    return;
  }
  fs::path d = fresh_dir("netns_restart");
  const std::string run = kRun + " --set train.steps=200 --set train.log_every=25 --set checkpoint.every=50" +
                          " --set dist.hang_timeout_s=10 --set dist.timeout_s=60 --max-restarts 2 --join-timeout 60" +
                          " --nproc 1 --nnodes 2 --master-addr " + NetnsNodes::address(0) + " --master-port 29555";
  auto node = [&](int i, const std::string& name, const std::string& log, const std::string& env = "") {
    return "(" + env + "timeout -k 5 120 ip netns exec " + net.ns[size_t(i)] + " " + run + " --set run.name=" + name +
           " --node-rank " + std::to_string(i) + " > " + log + " 2>&1; echo $? > " + log + ".rc) & ";
  };
  const std::string token = "export TRAINER_STORE_TOKEN=t$$; ";
  Result whole = shell(d, token + node(1, "whole", "w1") + node(0, "whole", "w0") + "wait");
  INFO(read(d / "w0"));
  REQUIRE(read(d / "w0.rc") == "0\n");
  REQUIRE(read(d / "w1.rc") == "0\n");

  // lose node 1 once `when` holds (a shell condition, polled), start it again a second later
  auto lose_and_return = [&](const std::string& name, const std::string& when, const std::string& env0) {
    const std::string wait_for = "for i in $(seq 600); do " + when + " && break; sleep 0.05; done; ";
    const std::string r = token + node(1, name, "a1") + node(0, name, "a0", env0) + wait_for + "ip netns pids " +
                          net.ns[1] + " | xargs -r kill -9; sleep 1; " + node(1, name, "b1") + "wait; ip netns pids " +
                          net.ns[0] + "; ip netns pids " + net.ns[1];
    return shell(d, r);
  };
  auto same_bytes = [&](const std::string& name) {
    for (const char* f : {"step_200/model.safetensors", "step_200/optimizer.safetensors", "final/model.safetensors"}) {
      INFO(f);
      CHECK(read(d / "runs" / name / "checkpoints" / f) == read(d / "runs/whole/checkpoints" / f));
    }
  };
  SECTION("during a step") {
    Result r = lose_and_return("lost", "grep -q 'step 100/' a0", "");
    INFO(read(d / "a0") << "\nnode 1 back:\n" << read(d / "b1"));
    CHECK(r.out.empty());  // no process left in either namespace
    CHECK(read(d / "a0.rc") == "0\n");
    CHECK(read(d / "b1.rc") == "0\n");
    CHECK_THAT(read(d / "a0"), Contains("restarting all 1 rank (restart 1 of 2)"));
    CHECK_THAT(read(d / "b1"), Contains("node 1 joins the job at round 1"));
    same_bytes("lost");
  }
  SECTION("during node 0's checkpoint write") {
    // each write pauses 1.5 s before its commit: node 1 dies while step 100's is in flight
    Result r = lose_and_return("lost_ckpt", "ls -a runs/lost_ckpt/checkpoints 2>/dev/null | grep -q '^.tmp-step_100'",
                               "TR_TEST_CHECKPOINT_WRITE_MS=1500 ");
    INFO(read(d / "a0") << "\nnode 1 back:\n" << read(d / "b1"));
    CHECK(r.out.empty());
    CHECK(read(d / "a0.rc") == "0\n");
    CHECK(read(d / "b1.rc") == "0\n");
    same_bytes("lost_ckpt");
  }
}

// Elastic size (issue 30): a checkpoint of 2 nodes resumes on 1 node and on 3. The global batch
// (96, which 1, 2 and 3 ranks split; the eval batch 996 too) and the data order do not depend on the world size, so the
// continuation's losses are the 2-node run's own (rtol 1e-5: the sums' order differs).
TEST_CASE("elastic: a 2-node checkpoint resumes on 1 node and on 3 with the same losses",
          "[integration][dist][netns]") {
  fs::path d = fresh_dir("netns_elastic");
  const std::string run = kRun + " --set data.batch_size=96 --set data.eval_batch_size=996 --set train.steps=40" +
                          " --set checkpoint.every=20 --set checkpoint.save_final=false";
  const std::string from = " --resume runs/two/checkpoints/step_20";
  // the last 20 train lines and the eval line of a run against the 2-node run's
  auto same_continuation = [&](const std::string& name) {
    const std::string ref = read(d / "runs/two/metrics.jsonl"), got = read(d / "runs" / name / "metrics.jsonl");
    for (const char* split : {"train", "eval"}) {
      const std::vector<double> a = metric_values(ref, split, "loss"), b = metric_values(got, split, "loss");
      REQUIRE(a.size() == (split == std::string("train") ? 40u : 1u));
      REQUIRE(b.size() == (split == std::string("train") ? 20u : 1u));
      for (size_t i = 0; i < b.size(); ++i) {
        INFO(name << " " << split << " line " << i);
        CHECK(b[i] == Approx(a[a.size() - b.size() + i]).epsilon(1e-5));
      }
    }
  };
  {
    NetnsNodes net(2);
    if (!net.why_not.empty()) {
      WARN("skipped: " << net.why_not);
      return;
    }
    Result r = run_nodes(d, net, run + " --set run.name=two");
    INFO(r.out);
    REQUIRE(r.code == 0);
  }
  Result one = shell(d, run + " --set run.name=one" + from);
  INFO(one.out);
  REQUIRE(one.code == 0);
  same_continuation("one");
  {
    NetnsNodes net(3);
    REQUIRE(net.why_not.empty());
    Result r = run_nodes(d, net, run + " --set run.name=three" + from);
    INFO(r.out);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.out, Contains("3 ranks (gloo over tcp)"));
  }
  same_continuation("three");
}

// Ranks a cluster's launcher started (issue 30): each node one task of srun's or mpirun's, given
// only that launcher's variables (no --nproc, so the binary starts no ranks; rank 0 serves the
// store), across two namespaces: the same losses as --nproc 2 on one host.
TEST_CASE("srun's and mpirun's variables across two namespace nodes equal --nproc 2", "[integration][dist][netns]") {
  NetnsNodes net(2);
  if (!net.why_not.empty()) {
    WARN("skipped: " << net.why_not);
    return;
  }
  fs::path d = fresh_dir("netns_cluster");
  Result one = shell(d, kRun + " --set run.name=one --nproc 2");
  INFO(one.out);
  REQUIRE(one.code == 0);
  // one thread per rank, as --nproc 2's ranks (run_nodes says why)
  const std::string master =
      " MASTER_ADDR=" + NetnsNodes::address(0) + " MASTER_PORT=29556 TRAINER_STORE_TOKEN=t$$ OMP_NUM_THREADS=1";
  auto tasks = [&](const std::string& name, const std::string& vars0, const std::string& vars1) {
    return shell(d, "(timeout -k 5 60 ip netns exec " + net.ns[1] + " env" + vars1 + master + " " + kRun +
                        " --set run.name=" + name +
                        " > task1.log 2>&1; echo $? > task1.rc) & timeout -k 5 60 ip netns exec " + net.ns[0] + " env" +
                        vars0 + master + " " + kRun + " --set run.name=" + name + "; rc=$?; wait; exit $rc");
  };
  SECTION("srun") {
    auto slurm = [](int i) {
      return " SLURM_PROCID=" + std::to_string(i) +
             " SLURM_NTASKS=2 SLURM_LOCALID=0 SLURM_NODEID=" + std::to_string(i) +
             " SLURM_TASKS_PER_NODE='1(x2)' SLURM_JOB_ID=77";
    };
    Result r = tasks("srun", slurm(0), slurm(1));
    INFO(r.out << "\ntask 1:\n" << read(d / "task1.log"));
    REQUIRE(r.code == 0);
    CHECK(read(d / "task1.rc") == "0\n");
    CHECK_THAT(r.out, Contains("2 ranks (gloo over tcp)"));
    check_same_losses(read(d / "runs/one/metrics.jsonl"), read(d / "runs/srun/metrics.jsonl"), 30);
  }
  SECTION("mpirun") {
    auto ompi = [](int i) {
      return " OMPI_COMM_WORLD_RANK=" + std::to_string(i) + " OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=0" +
             " OMPI_COMM_WORLD_LOCAL_SIZE=1";
    };
    Result r = tasks("mpirun", ompi(0), ompi(1));
    INFO(r.out << "\ntask 1:\n" << read(d / "task1.log"));
    REQUIRE(r.code == 0);
    CHECK(read(d / "task1.rc") == "0\n");
    CHECK_THAT(r.out, Contains("2 ranks (gloo over tcp)"));
    check_same_losses(read(d / "runs/one/metrics.jsonl"), read(d / "runs/mpirun/metrics.jsonl"), 30);
  }
}

// A node that never comes: node 0's launcher names it once the round's --join-timeout has passed,
// before any rank starts (on one host: the launchers' rendezvous needs no namespaces).
TEST_CASE("a node that never joins is named after --join-timeout", "[integration][dist]") {
  fs::path d = fresh_dir("never_joins");
  const auto t0 = std::chrono::steady_clock::now();
  Result r =
      shell(d, "TRAINER_STORE_TOKEN=t$$ timeout -k 5 60 " + kRun +
                   " --nproc 1 --nnodes 3 --node-rank 0 --master-addr 127.0.0.1 --master-port 29557 --join-timeout 2");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(s < 10);
  CHECK_THAT(r.out,
             Contains("round 0 of the launchers' rendezvous at 127.0.0.1:29557: nodes 1, 2 did not join within 2 s"));
  CHECK_THAT(r.out, !Contains("[rank 0]"));  // no rank was started
}

// A node that binds an address the others cannot reach (a second address of node 1, on a subnet
// node 0 has no route to): node 0's rendezvous fails at once naming that address and how to choose
// another, and node 1 does not wait for a store that is gone: its launcher hears of the failure.
TEST_CASE("an address the other nodes cannot reach: named with the way to choose another, both exit",
          "[integration][dist][netns]") {
  NetnsNodes net(2);
  if (!net.why_not.empty()) {
    WARN("skipped: " << net.why_not);
    return;
  }
  REQUIRE(shell("/", "ip -n " + net.ns[1] + " addr add 10.99.0.2/24 dev " + net.veth[1]).code == 0);
  fs::path d = fresh_dir("netns_unreachable");
  const auto t0 = std::chrono::steady_clock::now();
  const std::string run = kRun + " --set dist.timeout_s=30 --nproc 1 --nnodes 2 --master-addr " +
                          NetnsNodes::address(0) + " --master-port 29555";
  Result r =
      shell(d, "export TRAINER_STORE_TOKEN=t$$; (timeout -k 5 60 ip netns exec " + net.ns[1] + " " + run +
                   " --node-rank 1 --bind-addr 10.99.0.2 > node1.log 2>&1; echo $? > node1.rc) & " +
                   "timeout -k 5 60 ip netns exec " + net.ns[0] + " " + run + " --node-rank 0; rc=$?; wait; exit $rc");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.out << "\nnode 1:\n" << read(d / "node1.log"));
  CHECK(r.code == 1);
  CHECK(read(d / "node1.rc") == "1\n");
  CHECK(s < 15);  // not the 30 s of timeout_s
  CHECK_THAT(r.out, Contains("connecting to the other ranks failed") && Contains("rank 1 (node 1) at 10.99.0.2") &&
                        Contains("--bind-addr ADDR") && Contains("TRAINER_SOCKET_IFNAME"));
  CHECK_THAT(read(d / "node1.log"), Contains("node 1: the round failed on another node"));
}

}  // namespace test_netns_nodes
