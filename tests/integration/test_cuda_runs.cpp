// Training on CUDA against the same runs on the CPU, the real binary end to end: in CI through the
// CUDA emulator (the emulation build, tests/cuda_emu, which shows two devices), unchanged on a
// real GPU. Skipped, with a message, when the binary sees no CUDA device.
//
// The strict comparisons run in float64 ([run] dtype): a CUDA kernel and its CPU twin sum in
// different orders, and in float32 those last-bit differences grow step by step through training
// (measured on an H100: 1e-3 after 30 CNN steps), which would hide a real bug behind a loose
// tolerance; in float64 they stay below 1e-12, so 1e-9 separates rounding from a wrong kernel.
#include <nlohmann/json.hpp>
#include <cstring>
#include <map>
#include "integration/cli_harness.h"
#include "integration/cuda_devices.h"
#include "integration/safetensors_file.h"
#include "integration/tiny_gpt2.h"

namespace test_cuda_runs {

using namespace it;

namespace {

template <typename... A> std::string str_of(const A&... a) {
  std::ostringstream o;
  (o << ... << a);
  return o.str();
}

// The floating tensors of a safetensors file, as doubles, by name.
std::map<std::string, std::vector<double>> load_weights(const fs::path& p) {
  std::map<std::string, std::vector<double>> out;
  for (auto& [name, t] : read_safetensors(p)) {
    std::vector<double> v;
    if (t.dtype == "F64") {
      v.resize(t.bytes.size() / 8);
      std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
    } else if (t.dtype == "F32") {
      std::vector<float> f(t.bytes.size() / 4);
      std::memcpy(f.data(), t.bytes.data(), t.bytes.size());
      v.assign(f.begin(), f.end());
    } else {
      continue;  // integer buffers (num_batches_tracked) are compared by the losses they shape
    }
    out[name] = v;
  }
  return out;
}

void check_close(const std::vector<double>& a, const std::vector<double>& b, double rtol, double atol,
                 const std::string& what) {
  INFO(what);
  REQUIRE(a.size() == b.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::abs(a[i] - b[i]) <= atol + rtol * std::abs(a[i])) && bad++ == 0) first = i;
  INFO(bad << " of " << a.size() << " differ; first at " << first << ": " << (a.empty() ? 0 : a[first]) << " vs "
           << (b.empty() ? 0 : b[first]));
  CHECK(bad == 0);
}

// Runs `config` (repo-relative) as run `name` in d with `args`; requires success.
void run(const fs::path& d, const std::string& config, const std::string& name, const std::string& args) {
  Result r = trainer(d, "run '" + kRepo + "/" + config + "' --set run.out_dir=\\\"" + d.string() +
                            "/runs\\\" --set run.name=" + name + " --set log.progress=none " + args);
  INFO(r.out);
  REQUIRE(r.code == 0);
}

std::string metrics(const fs::path& d, const std::string& name) { return read(d / "runs" / name / "metrics.jsonl"); }

// The train and eval losses of runs a and b agree to rtol; their final weights to w_rtol / w_atol.
// (A weight never drives the losses that tell the runs apart: the bias of a convolution followed
// by batch norm, say, whose gradient is rounding noise that Adam scales to full steps, and the
// running statistics it shifts. Those agree to a looser rtol than the losses.)
void check_runs(const fs::path& d, const std::string& a, const std::string& b, double rtol, double w_rtol,
                double w_atol) {
  for (const char* split : {"train", "eval"}) {
    std::vector<double> la = metric_values(metrics(d, a), split, "loss"),
                        lb = metric_values(metrics(d, b), split, "loss");
    REQUIRE_FALSE(la.empty());
    check_close(la, lb, rtol, 0, str_of(a, " vs ", b, ": ", split, " losses"));
  }
  auto wa = load_weights(d / "runs" / a / "checkpoints/final/model.safetensors");
  auto wb = load_weights(d / "runs" / b / "checkpoints/final/model.safetensors");
  REQUIRE(wa.size() == wb.size());
  for (auto& [k, v] : wa) {
    REQUIRE(wb.count(k));
    check_close(v, wb.at(k), w_rtol, w_atol, str_of(a, " vs ", b, ": final ", k));
  }
}

}  // namespace

TEST_CASE("cuda: fmnist_cnn, fmnist_resnet and gpt_char on cuda follow the same runs on the CPU",
          "[cuda][integration]") {
  REQUIRE_CUDA_DEVICES(1);
  fs::path d = fresh_dir("cuda_vs_cpu");
  struct Case {
    const char* name;
    const char* config;
    std::string args;  // sizes cut for the emulator, which is ~1000x slower than a GPU
  };
  const Case cases[] = {
      {"cnn", "configs/fmnist_cnn.toml",
       "--set train.steps=30 --set data.batch_size=32 --set data.eval_batch_size=200 --set train.eval_batches=1"},
      {"resnet", "configs/fmnist_resnet.toml",
       "--set train.steps=3 --set data.batch_size=16 --set data.eval_batch_size=100 --set train.eval_batches=1"},
      {"gpt", "configs/gpt_char.toml", "--set train.steps=30 --set data.batch_size=2 --set train.eval_batches=1"},
  };
  for (const Case& c : cases) {
    const std::string common =
        c.args + " --set run.dtype=\\\"float64\\\" --set train.log_every=1 --set run.deterministic=true";
    run(d, c.config, std::string(c.name) + "_cpu", common + " --set run.device=\\\"cpu\\\"");
    run(d, c.config, std::string(c.name) + "_cuda", common + " --set run.device=\\\"cuda\\\"");
    check_runs(d, std::string(c.name) + "_cpu", std::string(c.name) + "_cuda", 1e-9, 1e-6, 1e-9);
  }
  // float32 as trained: step 1 equal to the last bits, then rounding differences may grow
  const std::string f32 = std::string(cases[0].args) + " --set train.log_every=1 --set run.allow_tf32=false";
  run(d, cases[0].config, "cnn32_cpu", f32 + " --set run.device=\\\"cpu\\\"");
  run(d, cases[0].config, "cnn32_cuda", f32 + " --set run.device=\\\"cuda\\\"");
  std::vector<double> a = metric_values(metrics(d, "cnn32_cpu"), "train", "loss"),
                      b = metric_values(metrics(d, "cnn32_cuda"), "train", "loss");
  REQUIRE(a.size() == 30);
  check_close({a[0]}, {b[0]}, 1e-6, 0, "float32 cnn: the first step's loss");
  check_close(a, b, 1e-3, 0, "float32 cnn: every step's loss");
}

TEST_CASE("cuda: a tied GPT-2 trains on cuda as on the CPU, and under bf16 autocast", "[cuda][integration][gpt2]") {
  REQUIRE_CUDA_DEVICES(1);
  fs::path d = fresh_dir("cuda_gpt2");
  write(d / "tiny.toml", kTinyGpt2);
  const std::string common =
      " --set train.steps=8 --set data.batch_size=2 --set train.eval_every=4 "
      "--set train.log_every=1 --set log.progress=none --set run.dtype=\\\"float64\\\"";
  for (const char* dev : {"cpu", "cuda"}) {
    Result r = trainer(d, str_of("run tiny.toml --set run.name=", dev, common, " --set run.device=\\\"", dev, "\\\""));
    INFO(r.out);
    REQUIRE(r.code == 0);
  }
  check_runs(d, "cpu", "cuda", 1e-9, 1e-6, 1e-9);
  // bf16 autocast on cuda: the tied weight's two uses cast and accumulate into one f32 gradient
  Result r =
      trainer(d,
              "run tiny.toml --set run.name=bf16 --set train.steps=8 --set data.batch_size=2 --set log.progress=none "
              "--set run.device=\\\"cuda\\\" --set amp.enabled=true --set amp.dtype=\\\"bf16\\\"");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const std::vector<double> l = metric_values(metrics(d, "bf16"), "train", "loss");
  REQUIRE_FALSE(l.empty());
  CHECK(l.back() < l.front());
}

TEST_CASE("cuda: two ranks over NCCL, each on its own GPU, follow one rank", "[cuda][integration][dist]") {
  REQUIRE_CUDA_DEVICES(2);
  fs::path d = fresh_dir("cuda_nccl");
  const std::string common = "--set train.steps=20 --set train.log_every=1 --set run.device=\\\"cuda\\\"";
  run(d, "configs/fmnist_mlp.toml", "one", common);
  run(d, "configs/fmnist_mlp.toml", "two", common + " --nproc 2");
  std::vector<double> a = metric_values(metrics(d, "one"), "train", "loss"),
                      b = metric_values(metrics(d, "two"), "train", "loss");
  REQUIRE(a.size() == 20);
  check_close(a, b, 1e-5, 0, "1 rank vs 2 ranks over NCCL: train losses");
  // the batch is the global batch: 2 x 64 on cuda:0 and cuda:1 reduce to the 128 of one rank
  check_runs(d, "one", "two", 1e-5, 1e-4, 1e-8);
  // ZeRO-2 over NCCL's reduce_scatter and all_gather: DDP's numbers, half the optimizer state
  run(d, "configs/fmnist_mlp.toml", "two_zero", common + " --nproc 2 --set dist.shard=\\\"gradients\\\"");
  std::vector<double> c = metric_values(metrics(d, "two_zero"), "train", "loss");
  check_close(b, c, 1e-6, 0, "2 ranks vs 2 ranks with shard = gradients over NCCL: train losses");
  std::vector<double> sb = metric_values(metrics(d, "two"), "train", "optimizer_state_mb"),
                      sc = metric_values(metrics(d, "two_zero"), "train", "optimizer_state_mb");
  REQUIRE((sb.size() == 20 && sc.size() == 20));
  CHECK(sc.back() == Approx(sb.back() / 2).epsilon(0.1));
}

TEST_CASE("cuda: fp16 autocast with a loss scaler skips the same steps as on the CPU", "[cuda][integration][amp]") {
  REQUIRE_CUDA_DEVICES(1);
  fs::path d = fresh_dir("cuda_fp16");
  // an initial scale of 1e10 overflows fp16 until the scaler has backed off
  const std::string common =
      "--set train.steps=24 --set train.log_every=4 --set data.batch_size=32 --set data.eval_batch_size=200 "
      "--set train.eval_batches=1 --set amp.enabled=true --set amp.dtype=\\\"fp16\\\" "
      "--set amp.scaler.init_scale=1e10 --set run.allow_tf32=false";
  run(d, "configs/fmnist_cnn.toml", "cpu", common + " --set run.device=\\\"cpu\\\"");
  run(d, "configs/fmnist_cnn.toml", "cuda", common + " --set run.device=\\\"cuda\\\"");
  std::vector<double> sa = metric_values(metrics(d, "cpu"), "train", "skipped_steps"),
                      sb = metric_values(metrics(d, "cuda"), "train", "skipped_steps");
  REQUIRE(sa.size() == 6);
  CHECK(sa == sb);
  CHECK(sa.back() > 0);
  CHECK(metric_values(metrics(d, "cpu"), "train", "loss_scale") ==
        metric_values(metrics(d, "cuda"), "train", "loss_scale"));
}

TEST_CASE("cuda: a checkpoint written on cuda resumes on the CPU", "[cuda][integration][checkpoint]") {
  REQUIRE_CUDA_DEVICES(1);
  fs::path d = fresh_dir("cuda_resume");
  const std::string common =
      "--set train.steps=20 --set train.log_every=1 --set data.batch_size=32 --set data.eval_batch_size=200 "
      "--set train.eval_batches=1 --set run.dtype=\\\"float64\\\" --set run.deterministic=true";
  run(d, "configs/fmnist_cnn.toml", "straight", common + " --set run.device=\\\"cuda\\\"");
  run(d, "configs/fmnist_cnn.toml", "moved", common + " --set run.device=\\\"cuda\\\" --stop-at-step 10");
  Result r = trainer(d, "run '" + kRepo + "/configs/fmnist_cnn.toml' --set run.out_dir=\\\"" + d.string() +
                            "/runs\\\" --set run.name=moved --set log.progress=none " + common +
                            " --set run.device=\\\"cpu\\\" --resume auto");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("run.device: 'cuda' -> 'cpu'"));
  CHECK(metric_values(metrics(d, "moved"), "train", "loss").size() == 20);  // 10 lines from cuda, 10 from the CPU
  check_runs(d, "straight", "moved", 1e-9, 1e-6, 1e-9);
}

TEST_CASE("cuda: device errors are one clear message", "[cuda][integration]") {
  REQUIRE_CUDA_DEVICES(1);
  fs::path d = fresh_dir("cuda_errors");
  write(d / "syn.toml", kSyntheticConfig);
  const int n = cuda_devices();
  Result missing = trainer(d, "run syn.toml --set run.device=\\\"cuda:" + std::to_string(n) + "\\\"");
  CHECK(missing.code != 0);
  CHECK_THAT(missing.out, Contains("cuda:" + std::to_string(n)) && Contains("CUDA device(s) are visible"));
  Result too_many = trainer(d, "run syn.toml --set run.device=\\\"cuda\\\" --nproc " + std::to_string(n + 1));
  CHECK(too_many.code != 0);
  CHECK_THAT(too_many.out, Contains("has no GPU of its own") && Contains("--nproc gpu"));
  if (n >= 2) {
    Result pinned = trainer(d, "run syn.toml --set run.device=\\\"cuda:1\\\" --nproc 2");
    CHECK(pinned.code != 0);
    CHECK_THAT(pinned.out, Contains("would put all 2 ranks of this node on one GPU"));
  }
}

}  // namespace test_cuda_runs
