// `trainer plot` (runs' curves as one self-contained HTML or SVG file) and `trainer plan` (a run
// before it trains: groups, steps, FLOPs, memory per rank, the LR schedule, warnings), through the
// real binary.
#include "integration/cli_harness.h"

namespace test_plot_plan {

using namespace it;

namespace {
int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("plot: two runs' loss, accuracy and lr curves in one HTML page or one SVG", "[integration][plot]") {
  fs::path d = fresh_dir("plot");
  write(d / "syn.toml", kSyntheticConfig);
  REQUIRE(trainer(d, "run syn.toml --set run.name=a").code == 0);
  REQUIRE(trainer(d, "run syn.toml --set run.name=b --set optimizer.lr=0.02").code == 0);
  Result r = trainer(d, "plot runs/a runs/b -o p.html");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("wrote p.html (4 charts of 2 run(s))"));
  const std::string html = read(d / "p.html");
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(count(html, "<svg") == 4);
  for (const char* title : {">train loss<", ">eval loss<", ">eval accuracy<", ">learning rate<"})
    CHECK(count(html, title) == 1);
  CHECK(count(html, ">a</text>") == 4);  // each chart's legend names both runs
  CHECK(count(html, ">b</text>") == 4);
  CHECK(count(html, "<polyline") >= 8);
  CHECK(html.find("http") == html.find("http://www.w3.org/2000/svg"));  // nothing fetched from a network
  r = trainer(d, "plot runs/a runs/b -o p.svg");
  REQUIRE(r.code == 0);
  const std::string svg = read(d / "p.svg");
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(count(svg, "<svg") == 5);
  r = trainer(d, "plot runs/a runs/nope");
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Contains("runs/nope/metrics.jsonl"));
}

TEST_CASE("plan: groups, steps, FLOPs, memory and the schedule, warnings for likely mistakes", "[integration][plan]") {
  fs::path d = fresh_dir("plan");
  write(d / "syn.toml", kSyntheticConfig +
                            "[[optimizer.groups]]\nname = \"out\"\nmatch = [\"3.*\"]\nlr = 0.0\n"
                            "[scheduler]\ntype = \"lambda\"\ninterval = \"step\"\nlambda = \"warmup(step, 1000)\"\n");
  Result r = trainer(d, "plan syn.toml -o plan.html");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("default: 2 tensors, 144 parameters") && Contains("out: 2 tensors, 51 parameters"));
  CHECK_THAT(r.out, Contains("16 steps per epoch x 2 epoch(s) = 32 steps"));
  CHECK_THAT(r.out, Contains("FLOPs per step per rank: ") && Contains("a training step's peak ~ "));
  CHECK_THAT(r.out, Contains("warning: param group 'out' has lr 0 for the whole run"));
  CHECK_THAT(r.out, Contains("warning: the lr of param group 'default' rises over the whole run") &&
                        Contains("longer than the run's 32 steps"));
  CHECK(count(read(d / "plan.html"), "<polyline") >= 1);
  CHECK_FALSE(fs::exists(d / "runs"));  // nothing trained, nothing written
  // with ranks: each rank's micro-batch is its slice
  r = trainer(d, "plan syn.toml --nproc 2");
  CHECK_THAT(r.out, Contains("batch 32 (16 per rank)"));
  r = trainer(d, "plan syn.toml --nproc 3");
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Contains("must be divisible by the 3 ranks"));
}

TEST_CASE("plan: the memory estimate is within 20% of a run's measured peak (fmnist_mlp)", "[integration][plan]") {
  fs::path d = fresh_dir("plan_mem");
  Result p = trainer(d, "plan '" + kRepo + "/configs/fmnist_mlp.toml'");
  REQUIRE(p.code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(p.out, m, std::regex("a training step's peak ~ ([0-9.]+) MiB")));
  const double estimate = std::stod(m[1].str());
  Result r =
      trainer(d, "run '" + kRepo +
                     "/configs/fmnist_mlp.toml' --set train.steps=20 --set train.log_every=5 "
                     "--set log.progress=none --set checkpoint.save_final=false --set checkpoint.every_epoch=false");
  REQUIRE(r.code == 0);
  const std::vector<double> peaks = metric_values(read(d / "runs/fmnist_mlp/metrics.jsonl"), "train", "mem_peak_mb");
  REQUIRE(!peaks.empty());
  const double measured = *std::max_element(peaks.begin(), peaks.end());
  INFO("estimate " << estimate << " MiB, measured " << measured << " MiB");
  CHECK(std::abs(estimate - measured) <= 0.2 * measured);
  r = trainer(d, "plan '" + kRepo + "/configs/fmnist_mlp.toml' --nproc 2");
  REQUIRE(r.code == 0);
  // ranks: the memory per rank of each [dist] shard setting, the optimizer state halved by sharding
  std::smatch st;
  std::vector<double> state;
  for (const char* shard : {"none", "optimizer", "gradients"}) {
    REQUIRE(std::regex_search(r.out, st,
                              std::regex(std::string("  ") + shard +
                                         " +gradient memory [0-9.]+ MiB, "
                                         "optimizer state ([0-9.]+) MiB, a training step's peak ~ [0-9.]+ MiB")));
    state.push_back(std::stod(st[1].str()));
  }
  REQUIRE(state[0] > 0);
  CHECK(state[1] == Approx(state[0] / 2).epsilon(0.1));
  CHECK(state[2] == state[1]);
}

}  // namespace test_plot_plan
