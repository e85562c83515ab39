// Integration tests of the training-loop controls: parameter groups, LR schedulers, gradient
// clipping and accumulation, through the real binary.
#include <algorithm>
#include <cmath>
#include <vector>
#include "integration/cli_harness.h"

namespace test_train_controls {

using namespace it;

TEST_CASE("three parameter groups on fmnist_cnn: one lr per group per step", "[integration][optim]") {
  fs::path d = fresh_dir("groups");
  write(d / "groups.toml", R"(
[model]
file = ")" + kRepo + R"(/models/cnn_fmnist.toml"
[data]
dataset = "idx"
batch_size = 32
normalize = [0.2860, 0.3530]
[optimizer]
type = "sgd"
lr = 0.01
momentum = 0.9
weight_decay = 5e-4
[[optimizer.groups]]          # biases and batch-norm weights: no weight decay
name = "no_decay"
match = ["*.bias"]
modules = ["batch_norm2d"]
weight_decay = 0.0
[[optimizer.groups]]          # the classifier head at 10x lr
name = "head"
match = ["12.weight"]
lr = 0.1
[scheduler]
type = "lambda"
lambda = ["1 - step / total_steps", "1 - step / total_steps", "0.5"]
interval = "step"
[train]
steps = 12
log_every = 1
eval_batches = 1
)");
  Result r = trainer(d, "run groups.toml");
  INFO(r.out);
  REQUIRE(r.code == 0);
  auto rows = metric_lrs(read(d / "runs/groups/metrics.jsonl"));
  REQUIRE(rows.size() == 12);
  for (size_t i = 0; i < rows.size(); ++i) {
    INFO("step " << i + 1);
    REQUIRE(rows[i].size() == 3);
    double f = 1.0 - double(i) / 12.0;  // the lr step i+1 used: the lambda at step i (before its scheduler step)
    CHECK(rows[i][0] == Approx(0.01 * f).epsilon(1e-8));
    CHECK(rows[i][1] == Approx(0.01 * f).epsilon(1e-8));
    CHECK(rows[i][2] == Approx(0.05).epsilon(1e-8));
  }
  std::string cfg = read(d / "runs/groups/config.toml");
  CHECK_THAT(cfg, Contains("no_decay") && Contains("[scheduler]"));
}

TEST_CASE("train lines log the lr the step used: a warmup's first line shows its first lr", "[integration][optim]") {
  fs::path d = fresh_dir("warmup_lr");
  // per step: warmup(step, 8) = min(1, (step + 1) / 8); per epoch (16 steps each): LinearLR from 1/4
  write(d / "syn.toml", kSyntheticConfig + R"toml([scheduler]
type = "lambda"
lambda = "warmup(step, 8)"
interval = "step"
)toml");
  Result r = trainer(d, "run syn.toml --set train.log_every=1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  auto rows = metric_lrs(read(d / "runs/syn/metrics.jsonl"));
  REQUIRE(rows.size() == 32);
  CHECK(rows[0].at(0) == Approx(0.1 / 8).epsilon(1e-8));  // step 1 runs at 1/8 of the lr, as torch's first step
  for (size_t i = 0; i < rows.size(); ++i) {
    INFO("step " << i + 1);
    CHECK(rows[i].at(0) == Approx(0.1 * std::min(1.0, double(i + 1) / 8)).epsilon(1e-8));
  }
  CHECK(rows[7].at(0) == Approx(0.1).epsilon(1e-8));

  write(d / "lin.toml", kSyntheticConfig + R"([scheduler]
type = "linear"
start_factor = 0.25
total_iters = 2
)");
  r = trainer(d, "run lin.toml --set train.epochs=3");
  INFO(r.out);
  REQUIRE(r.code == 0);
  rows = metric_lrs(read(d / "runs/lin/metrics.jsonl"));
  REQUIRE(rows.size() == 12);  // log_every 4: steps 4, 8, ..., 48; epochs of 16 steps
  for (size_t i = 0; i < rows.size(); ++i) {
    const int epoch = int(i) / 4;  // lines 0-3 in epoch 0, ...
    INFO("line " << i);
    CHECK(rows[i].at(0) == Approx(0.1 * (epoch == 0 ? 0.25 : epoch == 1 ? 0.625 : 1.0)).epsilon(1e-8));
  }
}

TEST_CASE("gradient accumulation 4 x 32 equals one batch of 128", "[integration][optim]") {
  fs::path d = fresh_dir("accumulate");
  write(d / "syn.toml", synthetic_config_without_dropout());
  Result a = trainer(d, "run syn.toml --set run.name=big --set data.batch_size=128");
  INFO(a.out);
  REQUIRE(a.code == 0);
  Result b = trainer(d, "run syn.toml --set run.name=acc --set data.batch_size=32 --set train.accumulate=4");
  INFO(b.out);
  REQUIRE(b.code == 0);
  CHECK_THAT(b.out, Contains("4 micro-batches each"));
  std::string ma = read(d / "runs/big/metrics.jsonl"), mb = read(d / "runs/acc/metrics.jsonl");
  for (const char* split : {"train", "eval"}) {
    auto la = metric_values(ma, split, "loss"), lb = metric_values(mb, split, "loss");
    REQUIRE(la.size() == lb.size());
    REQUIRE(!la.empty());
    for (size_t i = 0; i < la.size(); ++i) CHECK(lb[i] == Approx(la[i]).epsilon(1e-5));
  }
  // ... and differs from plain batches of 32
  Result c = trainer(d, "run syn.toml --set run.name=small --set data.batch_size=32");
  REQUIRE(c.code == 0);
  CHECK(metric_values(read(d / "runs/small/metrics.jsonl"), "eval", "loss").back() !=
        Approx(metric_values(ma, "eval", "loss").back()).epsilon(1e-5));
}

TEST_CASE("grad_clip logs the total norm and bounds the step", "[integration][optim]") {
  fs::path d = fresh_dir("clip");
  write(d / "syn.toml", synthetic_config_without_dropout());
  Result r = trainer(d, "run syn.toml --set train.grad_clip.max_norm=0.01 --set train.log_every=1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  auto norms = metric_values(read(d / "runs/syn/metrics.jsonl"), "train", "grad_norm");
  REQUIRE(norms.size() == 32);
  for (double n : norms) CHECK(n > 0.01);  // the norms before clipping
  Result bad = trainer(d, "run syn.toml --set train.grad_clip.max_norm=1 --set train.grad_clip.norm_typ=2");
  CHECK(bad.code != 0);
  CHECK_THAT(bad.out, Contains("unknown key 'norm_typ'") && Contains("did you mean 'norm_type'"));
}

TEST_CASE("scheduler and group errors stop the run before training", "[integration][optim][errors]") {
  fs::path d = fresh_dir("sched_errors");
  write(d / "syn.toml", synthetic_config_without_dropout() + R"(
[scheduler]
type = "lambda"
lambda = ["0.95 ^ epoch", "0.95 ^ (epoch +"]
[[optimizer.groups]]
name = "biases"
match = ["*.bias"]
)");
  SECTION("a LambdaLR expression that does not parse names the group and the position") {
    Result r = trainer(d, "run syn.toml");
    INFO(r.out);
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Contains("syn.toml:31:") && Contains("param group 1 ('biases')") && Contains("position 15"));
    CHECK(!fs::exists(d / "runs/syn/metrics.jsonl"));
  }
  SECTION("an unknown scheduler key names the nearest valid key") {
    Result r =
        trainer(d, "run syn.toml --set 'scheduler.lambda=[\"1\", \"1\"]' --set scheduler.intervall=\\\"step\\\"");
    INFO(r.out);
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Contains("unknown key 'intervall'") && Contains("did you mean 'interval'"));
  }
  SECTION("an unknown scheduler type lists the types") {
    Result r = trainer(d, "run syn.toml --set scheduler.type=\\\"cosin\\\"");
    INFO(r.out);
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Contains("cosin") && Contains("cosine"));
  }
  SECTION("an unknown optimizer key names the nearest valid key") {
    Result r = trainer(d, "run syn.toml --set 'scheduler.lambda=[\"1\", \"1\"]' --set optimizer.weight_decy=0.1");
    INFO(r.out);
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Contains("unknown key 'weight_decy'") && Contains("did you mean 'weight_decay'"));
  }
  SECTION("a parameter claimed by two groups names both") {
    std::string c = synthetic_config_without_dropout() + R"(
[[optimizer.groups]]
name = "a"
match = ["*.bias"]
[[optimizer.groups]]
name = "b"
match = ["0.*"]
)";
    write(d / "two.toml", c);
    Result r = trainer(d, "run two.toml");
    INFO(r.out);
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Contains("0.bias") && Contains("'a'") && Contains("'b'"));
  }
}

TEST_CASE("[train] nonfinite: stop names the op and layer and saves the batch, skip leaves the step out",
          "[integration][nonfinite]") {
  fs::path d = fresh_dir("nonfinite");
  write(d / "syn.toml", synthetic_config_without_dropout());
  const std::string big_lr = " --set optimizer.lr=1e18 --set train.epochs=1 --set log.progress=lines";
  Result stop = trainer(d, "run syn.toml --set run.name=stop" + big_lr);
  INFO(stop.out);
  CHECK(stop.code == 1);
  CHECK_THAT(stop.out, Contains("training diverged at step 3") && Contains("made an inf or NaN from finite inputs") &&
                           Contains("in layer '") && Contains("(Linear) (forward)") &&
                           Contains("nonfinite_step_3.json"));
  const std::string saved = read(d / "runs/stop/nonfinite_step_3.json");
  CHECK_THAT(saved, Contains("\"step\":3") && Contains("\"indices\":["));
  // the same run with skip: every later step is left out, the weights stay those of step 2
  Result skip = trainer(d, "run syn.toml --set run.name=skip --set train.nonfinite=skip" + big_lr);
  INFO(skip.out);
  REQUIRE(skip.code == 0);
  CHECK_THAT(skip.out, Contains("the step is skipped"));
  const std::vector<double> skipped = metric_values(read(d / "runs/skip/metrics.jsonl"), "train", "nonfinite_skipped");
  REQUIRE(!skipped.empty());
  CHECK(skipped.back() == 14);  // 16 steps, the first 2 applied
  // warn: applied, the run goes on with a warning
  Result warn = trainer(d, "run syn.toml --set run.name=warn --set train.nonfinite=warn" + big_lr);
  CHECK(warn.code == 0);
  CHECK_THAT(warn.out, Contains("nonfinite = \"warn\""));
}

}  // namespace test_train_controls
