// ZeRO through the real binary ([dist] shard): on two ranks, shard = "optimizer" and "gradients"
// train the same numbers as unsharded DDP, hold half the optimizer state per rank, and write the
// same checkpoints; any checkpoint resumes on any world size and shard setting.
#include <cmath>
#include "integration/cli_harness.h"

namespace test_zero {

using namespace it;

namespace {

// AdamW (per-element state and a step count) in two param groups, a scheduler, a small bucket
// size so that parameters straddle the ranks' windows in several buckets.
const char* kZeroConfig = R"(
[run]
seed = 3
[model]
input = [8]
[[model.layers]]
type = "linear"
out_features = 33
[[model.layers]]
type = "tanh"
[[model.layers]]
type = "linear"
out_features = 17
[[model.layers]]
type = "gelu"
[[model.layers]]
type = "linear"
out_features = 4
[data]
dataset = "synthetic"
num_classes = 4
train_size = 2560
eval_size = 400
batch_size = 128
eval_batch_size = 200
[optimizer]
type = "adamw"
lr = 0.01
[[optimizer.groups]]
name = "no_decay"
match = ["*.bias"]
weight_decay = 0.0
[scheduler]
type = "cosine"
[train]
epochs = 3
log_every = 1
[checkpoint]
every = 20
keep_last = 10
[dist]
bucket_mb = 0.002
[log]
progress = "none"
)";

// The per-rank values of an array field of the last train line, e.g. "optimizer_state_mb_per_rank".
std::vector<double> last_array(const std::string& metrics, const std::string& key) {
  std::vector<double> v;
  std::regex re("\"split\":\"train\".*\"" + key + "\":\\[([^\\]]*)\\]");
  std::istringstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, re)) continue;
    v.clear();
    std::stringstream ss(m[1].str());
    for (std::string x; std::getline(ss, x, ',');) v.push_back(std::stod(x));
  }
  return v;
}

void check_losses_close(const std::string& a, const std::string& b, double rtol) {
  for (const char* split : {"train", "eval"}) {
    auto la = metric_values(a, split, "loss"), lb = metric_values(b, split, "loss");
    REQUIRE(la.size() == lb.size());
    REQUIRE(!la.empty());
    for (size_t i = 0; i < la.size(); ++i) {
      INFO(split << " line " << i);
      CHECK(lb[i] == Approx(la[i]).epsilon(rtol));
    }
  }
}

Result run(const fs::path& d, const std::string& args) {
  Result r = trainer(d, "run zero.toml " + args);
  INFO(r.out);
  REQUIRE(r.code == 0);
  return r;
}

}  // namespace

TEST_CASE("shard = optimizer and gradients on two ranks train DDP's numbers with half the optimizer state",
          "[integration][dist][zero]") {
  fs::path d = fresh_dir("zero_equal");
  write(d / "zero.toml", kZeroConfig);
  run(d, "--nproc 2 --set run.name=none");
  const std::string none = read(d / "runs/none/metrics.jsonl");
  const std::vector<double> full_state = last_array(none, "optimizer_state_mb_per_rank");
  REQUIRE(full_state.size() == 2);
  for (const std::string shard : {"optimizer", "gradients"}) {
    INFO("shard = " << shard);
    run(d, "--nproc 2 --set run.name=" + shard + " --set dist.shard=\"" + shard + "\"");
    const std::string m = read(d / "runs" / shard / "metrics.jsonl");
    // The shared-memory reduce-scatter sums each element as the allreduce does, and the optimizer
    // is elementwise: the same bits, so the same metrics and checkpoints, byte for byte.
    std::regex state(",\"optimizer_state_mb(_per_rank)?\":(\\[[^\\]]*\\]|[-0-9.e+]+)");
    CHECK(std::regex_replace(strip_timing(m), state, "") == std::regex_replace(strip_timing(none), state, ""));
    for (const char* f : {"checkpoints/step_40/optimizer.safetensors", "checkpoints/step_40/model.safetensors",
                          "checkpoints/final/model.safetensors"})
      CHECK(read(d / "runs" / shard / f) == read(d / "runs/none" / f));
    // measured: the bytes of the state tensors each rank holds
    const std::vector<double> st = last_array(m, "optimizer_state_mb_per_rank");
    REQUIRE(st.size() == 2);
    for (int r = 0; r < 2; ++r) CHECK(st[size_t(r)] == Approx(full_state[size_t(r)] / 2).epsilon(0.1));
  }
  // clipping: the shards' squared norms are summed over the ranks (rounded otherwise than one norm)
  run(d, "--nproc 2 --set run.name=clip --set train.grad_clip.max_norm=0.05");
  run(d, "--nproc 2 --set run.name=clip_g --set train.grad_clip.max_norm=0.05 --set dist.shard=\"gradients\"");
  check_losses_close(read(d / "runs/clip/metrics.jsonl"), read(d / "runs/clip_g/metrics.jsonl"), 1e-5);
  auto na = metric_values(read(d / "runs/clip/metrics.jsonl"), "train", "grad_norm");
  auto nb = metric_values(read(d / "runs/clip_g/metrics.jsonl"), "train", "grad_norm");
  REQUIRE(na.size() == nb.size());
  for (size_t i = 0; i < na.size(); ++i) CHECK(nb[i] == Approx(na[i]).epsilon(1e-5));
  // three ranks: windows that split parameters unevenly, and padding at the end of each bucket
  run(d,
      "--nproc 3 --set run.name=three --set data.batch_size=120 --set data.eval_batch_size=120 --set train.steps=25");
  run(d,
      "--nproc 3 --set run.name=three_g --set data.batch_size=120 --set data.eval_batch_size=120 --set train.steps=25 "
      "--set dist.shard=\"gradients\"");
  for (const char* f : {"checkpoints/step_20/optimizer.safetensors", "checkpoints/final/model.safetensors"})
    CHECK(read(d / "runs/three_g" / f) == read(d / "runs/three" / f));
  // fp16 with a loss scaler: an inf/NaN in either rank's windows skips the step on both ranks
  const std::string amp =
      "--set train.steps=30 --set amp.enabled=true --set amp.dtype=fp16 "
      "--set amp.scaler.init_scale=4294967296.0";  // 2^32: overflows for the first steps
  run(d, "--nproc 2 --set run.name=amp " + amp);
  run(d, "--nproc 2 --set run.name=amp_g --set dist.shard=\"gradients\" " + amp);
  const std::vector<double> sa = metric_values(read(d / "runs/amp/metrics.jsonl"), "train", "skipped_steps"),
                            sg = metric_values(read(d / "runs/amp_g/metrics.jsonl"), "train", "skipped_steps");
  REQUIRE(sa.size() == 30);
  CHECK(sa.back() >= 3);
  CHECK(sa == sg);
  check_losses_close(read(d / "runs/amp/metrics.jsonl"), read(d / "runs/amp_g/metrics.jsonl"), 0);
  // accumulation: the micro-batches add up full gradients locally, the last one reduce-scatters
  run(d, "--nproc 2 --set run.name=acc --set train.accumulate=3 --set train.steps=12");
  run(d, "--nproc 2 --set run.name=acc_g --set train.accumulate=3 --set train.steps=12 --set dist.shard=\"gradients\"");
  check_losses_close(read(d / "runs/acc/metrics.jsonl"), read(d / "runs/acc_g/metrics.jsonl"), 0);
}

TEST_CASE("resume matrix: 1 rank, 2 ranks unsharded, 2 ranks shard = gradients resume on each other",
          "[integration][dist][zero][checkpoint]") {
  fs::path d = fresh_dir("zero_resume");
  write(d / "zero.toml", kZeroConfig);
  struct Setting {
    std::string name, args;
    int world;
  };
  const std::vector<Setting> settings = {
      {"one", "", 1}, {"two", "--nproc 2", 2}, {"two_g", "--nproc 2 --set dist.shard=\"gradients\"", 2}};
  // the uninterrupted runs
  for (const auto& s : settings) run(d, s.args + " --set run.name=straight_" + s.name);
  // each stopped at step 30 (not a checkpoint step), resumed under every setting
  for (const auto& from : settings) {
    run(d, from.args + " --set run.name=part_" + from.name + " --stop-at-step 30");
    for (const auto& to : settings) {
      INFO("from " << from.name << " to " << to.name);
      const std::string name = "from_" + from.name + "_to_" + to.name;
      fs::copy(d / "runs" / ("part_" + from.name), d / "runs" / name, fs::copy_options::recursive);
      run(d, to.args + " --set run.name=" + name + " --resume auto");
      const std::string straight = read(d / "runs" / ("straight_" + to.name) / "metrics.jsonl");
      const std::string resumed = read(d / "runs" / name / "metrics.jsonl");
      if (from.world == to.world) {  // byte-exact where the world size is unchanged
        std::regex state(",\"optimizer_state_mb(_per_rank)?\":(\\[[^\\]]*\\]|[-0-9.e+]+)");
        CHECK(std::regex_replace(strip_timing(resumed), state, "") ==
              std::regex_replace(strip_timing(straight), state, ""));
        CHECK(read(d / "runs" / name / "checkpoints/final/model.safetensors") ==
              read(d / "runs" / ("straight_" + to.name) / "checkpoints/final/model.safetensors"));
      } else {
        check_losses_close(straight, resumed, 1e-5);
      }
    }
  }
}

}  // namespace test_zero
