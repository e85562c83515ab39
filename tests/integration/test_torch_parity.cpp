// Step for step with torch: a small CNN with batch norm (tests/fixtures/step_parity_model.toml)
// trained by AdamW from torch's starting weights on the first Fashion-MNIST training images in
// order, against torch 1.13's losses and final weights (generators/make_step_parity_fixture.py).
// With torch's own kernels (TR_SGEMM=openblas; oneDNN's convolutions, as torch's; one thread, as
// the fixture) the losses follow torch's to f32 rounding for 20 steps. The convolutions' biases
// are left out of the weight check: below a batch norm their gradients are rounding noise (the
// sums of the backward above them are not all torch's bit for bit), which AdamW turns into steps
// of +-lr; the norm cancels them.
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include "integration/cli_harness.h"
#include "integration/safetensors_file.h"

namespace test_torch_parity {

using namespace it;

namespace {

std::vector<float> floats(const StoredTensor& t) {
  REQUIRE(t.dtype == "F32");
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

struct Parity {
  double loss = 0;    // largest |trainer - torch| over the steps
  double weight = 0;  // over every weight and statistic but the convolutions' biases and running means
};

Parity run_parity(const std::string& name, const std::string& env, const std::string& sets = "") {
  const std::string fx = kRepo + "/tests/fixtures";
  const nlohmann::json ref = nlohmann::json::parse(read(fx + "/step_parity.json"));
  const fs::path d = fresh_dir("torch_parity_" + name);
  write(d / "run.toml", "[run]\nseed = 0\n[model]\nfile = '" + fx + "/step_parity_model.toml'\ninit = '" + fx +
                            "/step_parity_init.safetensors'\n[data]\ndataset = \"idx\"\nbatch_size = " +
                            std::to_string(ref.at("batch_size").get<int>()) +
                            "\nshuffle = false\nnormalize = [0.2860, 0.3530]\n[optimizer]\ntype = \"adamw\"\n"
                            "lr = 0.004\nweight_decay = 0.05\n[loss]\nlabel_smoothing = 0.1\n[train]\nsteps = " +
                            std::to_string(ref.at("losses").size()) + "\nlog_every = 1\n[log]\nprogress = \"none\"\n");
  const Result r = shell(d, env + " OMP_NUM_THREADS=1 '" TRAINER_BINARY "' run run.toml" + sets);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const std::vector<double> losses = metric_values(read(d / "runs/run/metrics.jsonl"), "train", "loss");
  REQUIRE(losses.size() == ref.at("losses").size());
  Parity p;
  for (size_t i = 0; i < losses.size(); ++i)
    p.loss = std::max(p.loss, std::abs(losses[i] - ref["losses"][i].get<double>()));
  const auto ours = read_safetensors(d / "runs/run/checkpoints/final/model.safetensors");
  const auto torch = read_safetensors(fx + "/step_parity_final.safetensors");
  for (const auto& [key, t] : torch) {
    if (t.dtype != "F32" || key == "0.bias" || key == "4.bias" || key.ends_with("running_mean")) continue;
    REQUIRE(ours.count(key) == 1);
    const std::vector<float> a = floats(ours.at(key)), b = floats(t);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) p.weight = std::max(p.weight, double(std::abs(a[i] - b[i])));
  }
  fs::remove_all(d);
  return p;
}

}  // namespace

TEST_CASE("a CNN with batch norm under AdamW follows torch's losses step for step", "[integration][parity]") {
  // measured 2.4e-7 (losses) and 4.8e-7 (weights)
  const Parity p = run_parity("reference", "TR_SGEMM=openblas");
  CHECK(p.loss < 1e-6);
  CHECK(p.weight < 5e-6);
  // trainer's own GEMM kernels, and the composite chains of the fused ops (batch norm's among them),
  // round in other orders: the same run within f32 noise (measured 1.4e-5)
  for (const char* s : {"", " --set run.fused_ops=false"}) {
    INFO(s);
    const Parity q = run_parity(*s ? "unfused" : "default", *s ? "TR_SGEMM=openblas" : "", s);
    CHECK(q.loss < 1e-4);
    CHECK(q.weight < 1e-3);
  }
}

}  // namespace test_torch_parity
