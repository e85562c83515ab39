// Mixed precision through the real binary: [amp] bf16 and fp16 runs train, fp16 logs its loss
// scale; a forced overflow (a huge init_scale) skips steps and halves the scale until training
// proceeds, with finite weights throughout; skipped steps leave the LR schedule where it was.
#include <cmath>
#include <cstring>
#include "integration/cli_harness.h"

namespace test_amp {

using namespace it;

namespace {

// Every f32 value of a safetensors file of f32 tensors is finite.
bool all_finite_f32(const fs::path& p) {
  std::string b = read(p);
  REQUIRE(b.size() >= 8);
  uint64_t n = 0;
  std::memcpy(&n, b.data(), 8);
  REQUIRE(b.size() >= 8 + n);
  REQUIRE(b.find("\"dtype\":\"F32\"") != std::string::npos);
  REQUIRE(b.substr(8, n).find("\"dtype\":\"I64\"") == std::string::npos);  // only f32 tensors here
  for (size_t off = 8 + n; off + 4 <= b.size(); off += 4) {
    float f;
    std::memcpy(&f, b.data() + off, 4);
    if (!std::isfinite(f)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("amp: bf16 and fp16 runs train, fp16 logs its loss scale", "[integration][amp]") {
  fs::path d = fresh_dir("amp");
  write(d / "syn.toml", kSyntheticConfig);
  Result f32 = trainer(d, "run syn.toml --set run.name=f32");
  REQUIRE(f32.code == 0);
  for (const char* dt : {"bf16", "fp16"}) {
    DYNAMIC_SECTION(dt) {
      Result r = trainer(
          d, std::string("run syn.toml --set run.name=") + dt + " --set amp.enabled=true --set amp.dtype=" + dt);
      INFO(r.out);
      REQUIRE(r.code == 0);
      std::string m = read(d / ("runs/" + std::string(dt)) / "metrics.jsonl");
      std::vector<double> acc = metric_values(m, "eval", "accuracy");
      std::vector<double> ref = metric_values(read(d / "runs/f32/metrics.jsonl"), "eval", "accuracy");
      REQUIRE((acc.size() == 2 && ref.size() == 2));
      CHECK(std::abs(acc.back() - ref.back()) <= 0.03);  // 128 eval samples: within 4 of them
      CHECK_THAT(read(d / ("runs/" + std::string(dt)) / "config.toml"), Contains("dtype = '" + std::string(dt) + "'"));
      if (std::string(dt) == "fp16") {
        CHECK_THAT(m, Contains("\"loss_scale\":") && Contains("\"skipped_steps\":"));
      } else {
        CHECK_THAT(m, !Contains("loss_scale"));  // bf16: no scaler unless asked
      }
    }
  }
}

TEST_CASE("amp: a forced overflow skips steps and halves the scale, weights stay finite", "[integration][amp]") {
  fs::path d = fresh_dir("amp_overflow");
  write(d / "syn.toml", kSyntheticConfig);
  // 2^40: fp16 gradients overflow until the scale is back near 2^16 (about 24 halvings)
  Result r = trainer(d,
                     "run syn.toml --set run.name=o --set amp.enabled=true --set amp.dtype=fp16 "
                     "--set amp.scaler.init_scale=1099511627776.0 --set train.log_every=1 "
                     "--set checkpoint.every=1 --set checkpoint.keep_last=0");
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::string m = read(d / "runs/o/metrics.jsonl");
  std::vector<double> scale = metric_values(m, "train", "loss_scale"),
                      skipped = metric_values(m, "train", "skipped_steps");
  REQUIRE(scale.size() == 32);
  // (metrics print 9 significant digits)
  CHECK(scale[0] == Approx(549755813888.0).epsilon(1e-8));  // halved once
  int64_t skips = int64_t(skipped.back());
  CHECK(skips >= 10);
  CHECK(skips < 32);  // then training proceeds
  for (size_t i = 1; i < scale.size(); ++i) {
    CHECK(scale[i] <= scale[i - 1]);  // growth_interval 2000: only halvings in 32 steps
    CHECK(scale[i] == Approx(skipped[i] > skipped[i - 1] ? scale[i - 1] / 2 : scale[i - 1]).epsilon(1e-8));
  }
  // every step's weights are finite, skipped or not
  for (int step = 1; step <= 32; ++step) {
    INFO("step " << step);
    CHECK(all_finite_f32(d / ("runs/o/checkpoints/step_" + std::to_string(step)) / "model.safetensors"));
  }
  // the skipped steps changed nothing: the weights after each skip equal the step before
  for (size_t i = 1; i < skipped.size(); ++i)
    if (skipped[i] > skipped[i - 1]) {
      INFO("step " << i + 1);
      CHECK(read(d / ("runs/o/checkpoints/step_" + std::to_string(i + 1)) / "model.safetensors") ==
            read(d / ("runs/o/checkpoints/step_" + std::to_string(i)) / "model.safetensors"));
    }
  std::vector<double> acc = metric_values(m, "eval", "accuracy");
  REQUIRE(!acc.empty());
  CHECK(acc.back() > 0.6);
}

TEST_CASE("amp: skipped steps do not advance the LR schedule", "[integration][amp]") {
  fs::path d = fresh_dir("amp_sched");
  write(d / "syn.toml", std::string(kSyntheticConfig) +
                            "[scheduler]\ntype = \"lambda\"\nlambda = \"1 / (1 + step)\"\ninterval = \"step\"\n");
  Result r = trainer(d,
                     "run syn.toml --set run.name=s --set amp.enabled=true --set amp.dtype=fp16 "
                     "--set amp.scaler.init_scale=1099511627776.0 --set train.log_every=1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::string m = read(d / "runs/s/metrics.jsonl");
  std::vector<double> skipped = metric_values(m, "train", "skipped_steps");
  std::vector<std::vector<double>> lr = metric_lrs(m);
  REQUIRE(lr.size() == skipped.size());
  REQUIRE(skipped.back() > 0);
  // step i+1 uses 0.1 / (1 + optimizer steps taken before it)
  for (size_t i = 0; i < lr.size(); ++i) {
    const double taken = double(i) - (i > 0 ? skipped[i - 1] : 0.0);
    CHECK(lr[i].at(0) == Approx(0.1 / (1.0 + taken)).epsilon(1e-6));
  }
}

TEST_CASE("amp: bad settings name the key", "[integration][amp][errors]") {
  fs::path d = fresh_dir("amp_errors");
  write(d / "syn.toml", kSyntheticConfig);
  Result r = trainer(d, "run syn.toml --set amp.dtype=fp8");
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Contains("dtype") && Contains("bf16") && Contains("fp16"));
  r = trainer(d, "run syn.toml --set amp.scaler.growth_factor=0.5");
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Contains("growth_factor") && Contains("must be > 1"));
}

TEST_CASE("amp: fp16 with accumulation (4 x 32) and clipping follows one batch of 128", "[integration][amp]") {
  fs::path d = fresh_dir("amp_accumulate");
  write(d / "syn.toml", synthetic_config_without_dropout());
  const std::string args =
      " --set amp.enabled=true --set amp.dtype=fp16 --set amp.scaler.init_scale=1099511627776.0 "
      "--set train.grad_clip.max_norm=1.0 --set train.log_every=1";
  Result a = trainer(d, "run syn.toml --set run.name=big --set data.batch_size=128" + args);
  INFO(a.out);
  REQUIRE(a.code == 0);
  Result b = trainer(d, "run syn.toml --set run.name=acc --set data.batch_size=32 --set train.accumulate=4" + args);
  INFO(b.out);
  REQUIRE(b.code == 0);
  std::string ma = read(d / "runs/big/metrics.jsonl"), mb = read(d / "runs/acc/metrics.jsonl");
  std::vector<double> sa = metric_values(ma, "train", "skipped_steps"),
                      sb = metric_values(mb, "train", "skipped_steps");
  REQUIRE(!sa.empty());
  CHECK(sa == sb);  // the scaled micro-batch gradients overflow exactly when the big batch's do
  CHECK(sa.back() > 0);
  auto la = metric_values(ma, "train", "loss"), lb = metric_values(mb, "train", "loss");
  REQUIRE(la.size() == lb.size());
  for (size_t i = 0; i < la.size(); ++i) CHECK(lb[i] == Approx(la[i]).epsilon(1e-2));
  auto na = metric_values(ma, "train", "grad_norm"), nb = metric_values(mb, "train", "grad_norm");
  CHECK(na.size() == la.size() - size_t(sa.back()));  // no norm on skipped steps
  CHECK(nb.size() == na.size());
}

}  // namespace test_amp
