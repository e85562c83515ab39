// Data-parallel runs through the real binary: --nproc 2 equals one process with the same global
// batch, resume across world sizes, a killed rank, a rank that never joins.
#include <chrono>
#include <cmath>
#include "integration/cli_harness.h"

namespace test_ddp {

using namespace it;

namespace {

// A model without dropout or batch norm: 2 ranks x 64 must equal 1 x 128.
const char* kDdpConfig = R"(
[run]
seed = 7
[model]
input = [8]
[[model.layers]]
type = "linear"
out_features = 32
[[model.layers]]
type = "tanh"
[[model.layers]]
type = "linear"
out_features = 4
[data]
dataset = "synthetic"
num_classes = 4
train_size = 6400
eval_size = 1000
batch_size = 128
eval_batch_size = 200
[optimizer]
lr = 0.05
momentum = 0.9
[train]
epochs = 4
log_every = 1
[log]
progress = "none"
)";

void check_close(const std::string& a, const std::string& b, double rtol) {
  for (const char* split : {"train", "eval"}) {
    auto la = metric_values(a, split, "loss"), lb = metric_values(b, split, "loss");
    REQUIRE(la.size() == lb.size());
    for (size_t i = 0; i < la.size(); ++i) {
      INFO(split << " line " << i);
      CHECK(lb[i] == Approx(la[i]).epsilon(rtol));
    }
  }
  auto aa = metric_values(a, "eval", "accuracy"), ab = metric_values(b, "eval", "accuracy");
  REQUIRE(aa.size() == ab.size());
  for (size_t i = 0; i < aa.size(); ++i) CHECK(std::abs(aa[i] - ab[i]) <= 0.001);
}

// Runs ddp.toml in one process as run `name` and on two ranks as `name`2, the same extra args;
// both must succeed. Returns their metrics.jsonl.
std::pair<std::string, std::string> one_and_two_ranks(const fs::path& d, const std::string& name,
                                                      const std::string& args = "") {
  Result one = trainer(d, "run ddp.toml --set run.name=" + name + " " + args);
  INFO(one.out);
  REQUIRE(one.code == 0);
  Result two = trainer(d, "run ddp.toml --set run.name=" + name + "2 --nproc 2 " + args);
  INFO(two.out);
  REQUIRE(two.code == 0);
  return {read(d / "runs" / name / "metrics.jsonl"), read(d / "runs" / (name + "2") / "metrics.jsonl")};
}

}  // namespace

TEST_CASE("two ranks x 64 (--nproc 2) equal one process x 128 over 200 steps", "[integration][dist]") {
  fs::path d = fresh_dir("ddp_equal");
  write(d / "ddp.toml", kDdpConfig);
  auto [m1, m2] = one_and_two_ranks(d, "plain");
  CHECK(metric_values(m1, "train", "loss").size() == 200);
  check_close(m1, m2, 1e-5);

  // two micro-batches per step: the first backward keeps its gradients local (no_sync), the
  // second averages the sum, from gradients that were the buckets' views in the step before
  auto [a1, a2] = one_and_two_ranks(d, "acc", "--set train.accumulate=2 --set train.steps=60");
  CHECK(metric_values(a1, "train", "loss").size() == 60);
  check_close(a1, a2, 1e-5);
}

TEST_CASE("a 2-rank run resumes exactly, and continues with --nproc 1", "[integration][dist][checkpoint]") {
  fs::path d = fresh_dir("ddp_resume");
  write(d / "ddp.toml", kDdpConfig);
  REQUIRE(trainer(d, "run ddp.toml --set run.name=straight --nproc 2").code == 0);
  Result a = trainer(d, "run ddp.toml --set run.name=r2 --nproc 2 --stop-at-step 77");
  INFO(a.out);
  REQUIRE(a.code == 0);
  fs::copy(d / "runs/r2", d / "runs/r1", fs::copy_options::recursive);
  Result b = trainer(d, "run ddp.toml --set run.name=r2 --nproc 2 --resume auto");
  INFO(b.out);
  REQUIRE(b.code == 0);
  std::string ms = read(d / "runs/straight/metrics.jsonl");
  CHECK(strip_timing(ms) == strip_timing(read(d / "runs/r2/metrics.jsonl")));
  CHECK(read(d / "runs/straight/checkpoints/final/model.safetensors") ==
        read(d / "runs/r2/checkpoints/final/model.safetensors"));
  Result c = trainer(d, "run ddp.toml --set run.name=r1 --resume auto");
  INFO(c.out);
  REQUIRE(c.code == 0);
  check_close(ms, read(d / "runs/r1/metrics.jsonl"), 1e-5);
}

TEST_CASE("EMA of the weights on two ranks follows one process and resumes exactly", "[integration][dist][ema]") {
  fs::path d = fresh_dir("ddp_ema");
  write(d / "ddp.toml", kDdpConfig);
  const std::string ema = " --set train.ema_decay=0.95";
  auto [m1, m2] = one_and_two_ranks(d, "one", ema);
  auto e1 = metric_values(m1, "eval", "ema_loss"), e2 = metric_values(m2, "eval", "ema_loss");
  REQUIRE(e1.size() == 4);
  REQUIRE(e2.size() == e1.size());
  for (size_t i = 0; i < e1.size(); ++i) CHECK(e2[i] == Approx(e1[i]).epsilon(1e-5));
  auto a1 = metric_values(m1, "eval", "ema_accuracy"), a2 = metric_values(m2, "eval", "ema_accuracy");
  REQUIRE(a2.size() == a1.size());
  for (size_t i = 0; i < a1.size(); ++i) CHECK(std::abs(a1[i] - a2[i]) <= 0.001);

  // with batch norm (buffers, which DDP broadcasts from rank 0 before every forward), stopped and
  // resumed on two ranks: the same metrics and EMA weights as straight through
  std::string c = kDdpConfig;
  c.replace(c.find("[[model.layers]]\ntype = \"tanh\""), 0, "[[model.layers]]\ntype = \"batch_norm1d\"\n");
  write(d / "bn.toml", c);
  Result s2 = trainer(d, "run bn.toml --set run.name=straight --nproc 2" + ema);
  INFO(s2.out);
  REQUIRE(s2.code == 0);
  Result a = trainer(d, "run bn.toml --set run.name=r2 --nproc 2 --stop-at-step 77" + ema);
  INFO(a.out);
  REQUIRE(a.code == 0);
  Result b = trainer(d, "run bn.toml --set run.name=r2 --nproc 2 --resume auto" + ema);
  INFO(b.out);
  REQUIRE(b.code == 0);
  const std::string ms = read(d / "runs/straight/metrics.jsonl");
  CHECK(metric_values(ms, "eval", "ema_accuracy").size() == 4);
  CHECK(strip_timing(ms) == strip_timing(read(d / "runs/r2/metrics.jsonl")));
  CHECK(read(d / "runs/straight/checkpoints/final/ema.safetensors") ==
        read(d / "runs/r2/checkpoints/final/ema.safetensors"));
}

TEST_CASE("kill -9 of one rank: every process gone, one summary, non-zero, --max-restarts completes the run",
          "[integration][dist]") {
  fs::path d = fresh_dir("ddp_kill");
  write(d / "ddp.toml", kDdpConfig);
  const std::string args = "--set train.epochs=400 --set checkpoint.every=100 --nproc 2";
  auto kill_one_rank = [&](const std::string& extra) {
    return shell(
        d, "'" TRAINER_BINARY "' run ddp.toml " + args + " " + extra +
               " > launch.log 2>&1 & lp=$!; "
               "while [ \"$(ls runs/ddp/checkpoints 2>/dev/null | grep -c step_)\" -lt 1 ]; do sleep 0.05; done; "
               "kids=$(pgrep -P $lp); kill -9 $(echo $kids | tr ' ' '\\n' | tail -1); SECONDS=0; wait $lp; st=$?; "
               "echo \"status $st after $SECONDS s\"; sleep 0.5; n=0; "
               "for p in $kids; do kill -0 $p 2>/dev/null && n=$((n+1)); done; echo $n");
  };
  Result r = kill_one_rank("");
  INFO(r.out << read(d / "launch.log"));
  CHECK_THAT(r.out, Contains("status 137"));
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex("after ([0-9]+) s\\n([0-9]+)")));
  CHECK(std::stoi(m[1].str()) <= 30);
  CHECK(m[2].str() == "0");  // no rank left behind
  CHECK_THAT(read(d / "launch.log"), Contains("trainer launch: rank 1") && Contains("killed by signal 9"));

  fs::remove_all(d / "runs");
  Result again = kill_one_rank("--max-restarts 1 --set train.epochs=20");
  INFO(again.out << read(d / "launch.log"));
  CHECK_THAT(again.out, Contains("status 0"));
  CHECK_THAT(read(d / "launch.log"), Contains("restarting all 2 ranks"));
  CHECK(metric_values(read(d / "runs/ddp/metrics.jsonl"), "train", "loss").size() == 1000);  // 20 epochs x 50 steps
  CHECK(fs::exists(d / "runs/ddp/checkpoints/final/model.safetensors"));
}

TEST_CASE("a rank that never joins: a clear timeout naming it", "[integration][dist][errors]") {
  fs::path d = fresh_dir("ddp_nojoin");
  write(d / "ddp.toml", kDdpConfig);
  Result r = shell(d,
                   "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + $$ % 20000)) "
                   "timeout 60 '" TRAINER_BINARY "' run ddp.toml --set dist.timeout_s=3");
  INFO(r.out);
  CHECK(r.code != 0);
  CHECK(r.code != 124);  // not killed by timeout(1): it gave up by itself
  CHECK_THAT(r.out, Contains("rank 1"));
}

TEST_CASE("fp16 autocast with a loss scaler on two ranks: the same steps are skipped as in one process",
          "[integration][dist][amp]") {
  fs::path d = fresh_dir("ddp_amp");
  write(d / "ddp.toml", kDdpConfig);
  const std::string args =
      "--set train.steps=40 --set train.log_every=1 --set amp.enabled=true --set amp.dtype=fp16 "
      "--set amp.scaler.init_scale=1099511627776.0";
  auto [m1, m2] = one_and_two_ranks(d, "one", args);
  std::vector<double> s1 = metric_values(m1, "train", "skipped_steps"),
                      s2 = metric_values(m2, "train", "skipped_steps");
  REQUIRE(s1.size() == 40);
  CHECK(s1 == s2);
  CHECK(s1.back() >= 10);
  std::vector<double> l1 = metric_values(m1, "train", "loss"), l2 = metric_values(m2, "train", "loss");
  REQUIRE(l1.size() == l2.size());
  for (size_t i = 0; i < l1.size(); ++i) CHECK(l2[i] == Approx(l1[i]).epsilon(1e-2));
}

TEST_CASE("two nodes on one machine (--nnodes 2 with one rank each) equal one process", "[integration][dist]") {
  fs::path d = fresh_dir("ddp_nodes");
  write(d / "ddp.toml", kDdpConfig);
  Result one = trainer(d, "run ddp.toml --set run.name=one --set train.steps=60");
  REQUIRE(one.code == 0);
  // node 1 in the background, node 0 (which serves the store) in the foreground
  const std::string node = "'" TRAINER_BINARY
                           "' run ddp.toml --set run.name=nodes --set train.steps=60 --nproc 1 "
                           "--nnodes 2 --master-addr 127.0.0.1 --master-port $PORT --node-rank ";
  Result r = shell(d, "export TRAINER_STORE_TOKEN=t$$; PORT=$((21000 + $$ % 20000)); (" + node +
                          "1 > node1.log 2>&1; echo $? > node1.rc) & " + node + "0; rc=$?; wait; exit $rc");
  INFO(r.out << "\nnode 1:\n" << read(d / "node1.log"));
  REQUIRE(r.code == 0);
  CHECK(read(d / "node1.rc") == "0\n");
  std::string m1 = read(d / "runs/one/metrics.jsonl"), m2 = read(d / "runs/nodes/metrics.jsonl");
  CHECK(metric_values(m2, "train", "loss").size() == 60);
  check_close(m1, m2, 1e-5);
}

TEST_CASE("ranks started by srun or mpirun (their environments set by hand) equal one process", "[integration][dist]") {
  fs::path d = fresh_dir("ddp_cluster");
  write(d / "ddp.toml", kDdpConfig);
  Result one = trainer(d, "run ddp.toml --set run.name=one --set train.steps=40");
  REQUIRE(one.code == 0);
  const std::string m1 = read(d / "runs/one/metrics.jsonl");
  // what srun gives each task (MASTER_ADDR from the node list, MASTER_PORT from the job id), and
  // what mpirun gives (with the rendezvous address passed by -x)
  const std::string slurm =
      "SLURM_NTASKS=2 SLURM_TASKS_PER_NODE=2 SLURM_NODEID=0 SLURM_JOB_NODELIST=localhost "
      "SLURM_JOB_ID=$((4000 + $$ % 9000)) SLURM_PROCID=R SLURM_LOCALID=R";
  const std::string mpi =
      "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_SIZE=2 MASTER_ADDR=127.0.0.1 "
      "MASTER_PORT=$((21000 + $$ % 20000)) OMPI_COMM_WORLD_RANK=R OMPI_COMM_WORLD_LOCAL_RANK=R";
  for (const auto& launcher : {std::pair{"slurm", slurm}, std::pair{"mpi", mpi}}) {
    const char* name = launcher.first;
    const std::string& vars = launcher.second;
    DYNAMIC_SECTION(name) {
      auto rank = [&](const char* r) {
        return std::regex_replace(vars, std::regex("=R\\b"), std::string("=") + r) +
               " '" TRAINER_BINARY "' run ddp.toml " + "--set run.name=" + name +
               " --set train.steps=40 --set log.progress=lines";
      };
      Result r = shell(d, "(env " + rank("1") + " > rank1.log 2>&1; echo $? > rank1.rc) & env " + rank("0") +
                              "; rc=$?; wait; exit $rc");
      INFO(r.out << "\nrank 1:\n" << read(d / "rank1.log"));
      REQUIRE(r.code == 0);
      CHECK(read(d / "rank1.rc") == "0\n");
      CHECK_THAT(r.out, Contains("2 ranks"));
      const std::string m2 = read(d / "runs" / name / "metrics.jsonl");
      CHECK(metric_values(m2, "train", "loss").size() == 40);
      check_close(m1, m2, 1e-5);
    }
  }
}

TEST_CASE("a frozen param group on two ranks: no bucket for it, the run equals one process", "[integration][dist]") {
  fs::path d = fresh_dir("ddp_frozen");
  write(d / "ddp.toml",
        std::string(kDdpConfig) + "[[optimizer.groups]]\nname = \"first\"\nmatch = [\"0.*\"]\nfrozen = true\n");
  auto [m1, m2] = one_and_two_ranks(d, "frozen", "--set train.steps=40");
  CHECK(metric_values(m1, "train", "loss").size() == 40);
  check_close(m1, m2, 1e-5);
  // one lr per trainable group: the frozen one is not in the optimizer
  CHECK(metric_lrs(m1).front().size() == 1);
}

TEST_CASE("an eval batch the ranks cannot split is an error before the first step, not at the first eval",
          "[integration][dist][errors]") {
  fs::path d = fresh_dir("ddp_eval_split");
  write(d / "ddp.toml", kDdpConfig);
  Result r = trainer(d, "run ddp.toml --nproc 2 --set run.name=split --set data.eval_batch_size=201");
  INFO(r.out);
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Contains("ddp.toml: [data] eval_batch_size = 201 must be divisible by the number of ranks (2)"));
  const fs::path metrics = d / "runs/split/metrics.jsonl";
  CHECK((!fs::exists(metrics) || read(metrics).find("\"step\"") == std::string::npos));  // nothing trained
}

TEST_CASE("a stopped rank: the hang watchdog names it as the one that stopped publishing, with its status's age",
          "[integration][dist][errors]") {
  fs::path d = fresh_dir("ddp_sigstop");
  write(d / "ddp.toml", kDdpConfig);
  // rank 1 SIGSTOPped once the run has logged 20 steps and its watchdog has published (once a
  // second) for a while: rank 0 waits in the next allreduce until
  // hang_timeout_s = 3, and its report must name rank 1 first, its status seconds old
  const auto t0 = std::chrono::steady_clock::now();
  Result r = shell(d, "timeout 120 '" TRAINER_BINARY
                      "' run ddp.toml --nproc 2 --set run.name=stop --set train.epochs=1000 "
                      "--set dist.hang_timeout_s=3 > out.txt 2>&1 & L=$!; "
                      "for i in $(seq 300); do grep -q '\"step\":20,' runs/stop/metrics.jsonl 2>/dev/null && break; "
                      "sleep 0.1; done; sleep 2; "
                      "for p in $(pgrep -f 'run.name=sto[p]'); do tr '\\0' '\\n' < /proc/$p/environ | grep -qx RANK=1 "
                      "&& kill -STOP $p && echo stopped; done; "
                      "wait $L; echo rc=$?; cat out.txt");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.out);
  CHECK_THAT(r.out, Contains("stopped\n") && Contains("rc=3"));
  CHECK_THAT(r.out, Contains("rank 1 stopped publishing (stopped, dead or cut off): the suspect"));
  const size_t r1 = r.out.find("rank 1 (pid"), r0 = r.out.find("rank 0 (pid");
  REQUIRE(r1 != std::string::npos);
  REQUIRE(r0 != std::string::npos);
  CHECK(r1 < r0);
  CHECK_THAT(r.out, Contains("STOPPED PUBLISHING; status "));
  // the stale status is at least the timeout old (rank 1 stopped before rank 0's phase began)
  const size_t age_at = r.out.find("STOPPED PUBLISHING; status ") + std::string("STOPPED PUBLISHING; status ").size();
  CHECK(std::stod(r.out.substr(age_at)) >= 3.0);
  CHECK(secs < 60);
  Result left = shell(d, "pgrep -f 'run.name=sto[p]' | wc -l");
  CHECK(left.out == "0\n");
}

TEST_CASE("a rank stuck inside a collective: the hang watchdog names it, every rank stops",
          "[integration][dist][errors]") {
  fs::path d = fresh_dir("ddp_hang");
  write(d / "ddp.toml", kDdpConfig);
  // rank 1's 30th collective never finishes (a test hook of the Gloo group); hang_timeout_s = 3
  const auto t0 = std::chrono::steady_clock::now();
  Result r = shell(d, "TR_TEST_STALL_COLLECTIVE=1:30 timeout 120 '" TRAINER_BINARY
                      "' run ddp.toml --nproc 2 --set run.name=hang --set dist.hang_timeout_s=3; echo rc=$?");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.out);
  CHECK_THAT(r.out, Contains("rc=3"));
  CHECK_THAT(r.out, Contains("hang watchdog") && Contains("hang_timeout_s = 3.0 s") && Contains("rank 1 (pid") &&
                        Contains("last completed step") && Contains("(tag 30)"));
  CHECK(secs < 3 + 5 + 10);  // start-up and the steps before the stall are a few seconds
  Result left = shell(d, "pgrep -f 'run.name=han[g]' | wc -l");
  CHECK(left.out == "0\n");
}

}  // namespace test_ddp
