// What one linear layer costs a training step in kernel launches on CUDA (issue 29, "fewer
// launches"): its forward is one cuBLASLt GEMM with the bias (and a following ReLU) in the epilogue,
// its backward two GEMMs, the input's gradient and the weight's with the bias gradient in its
// epilogue (no separate reduction); with [run] fused_ops = false the composite's GEMM, add and
// reduction come back. Counted by the CUDA emulator (TR_CUDA_EMU_COUNTS, per NVTX phase of the
// step); a layer's count is the difference of models with and without it, a step's the difference
// of runs of 2 and 4 steps. On a real GPU no counts are written and the test says so.
#include <nlohmann/json.hpp>
#include <optional>
#include "integration/cli_harness.h"
#include "integration/cuda_devices.h"
#include "integration/emulator_counts.h"

namespace test_cuda_linear_launches {

using namespace it;

namespace {

struct Phases {
  double forward = 0, backward = 0;
  Phases operator-(const Phases& o) const { return {forward - o.forward, backward - o.backward}; }
  Phases operator/(double d) const { return {forward / d, backward / d}; }
};

// Kernels of the forward and backward phases of a run of `steps` steps of a synthetic classifier
// on cuda: 32 inputs, `middle` (layer tables) between a first linear(32) and the head linear(3);
// nullopt where the binary writes no counts (not the emulator).
std::optional<Phases> run_model(const fs::path& d, const std::string& name, const std::string& middle, int steps,
                                const std::string& extra = "") {
  const std::string cfg = R"([run]
seed = 1
device = "cuda"
[model]
input = [32]
[[model.layers]]
type = "linear"
out_features = 32
)" + middle + R"([[model.layers]]
type = "linear"
out_features = 3
[data]
dataset = "synthetic"
num_classes = 3
train_size = 256
eval_size = 32
batch_size = 32
[optimizer]
lr = 0.1
[train]
steps = 100
eval_every = 0
log_every = 1000
[checkpoint]
every = 0
every_epoch = false
save_final = false
[log]
progress = "none"
)";
  const std::string run = name + "_s" + std::to_string(steps);
  const auto lines =
      run_counted(d, run, cfg, "--set train.steps=" + std::to_string(steps) + " --set train.eval_batches=1 " + extra);
  if (!lines) return std::nullopt;
  const nlohmann::json& j = lines->front();
  const auto kernels = [&](const char* range) {
    return j["ranges"].contains(range) ? j["ranges"][range].value("kernels", 0.0) : 0.0;
  };
  return Phases{kernels("forward"), kernels("backward")};
}

// Kernels one step spends on the layers `middle` adds to the model `base` (its runs given).
struct Steps {
  Phases two, four;
};
std::optional<Steps> steps_of(const fs::path& d, const std::string& name, const std::string& middle,
                              const std::string& extra = "") {
  const auto two = run_model(d, name, middle, 2, extra);
  if (!two) return std::nullopt;
  return Steps{*two, *run_model(d, name, middle, 4, extra)};
}
Phases per_layer(const Steps& base, const Steps& with) {
  return ((with.four - with.two) - (base.four - base.two)) / 2.0;
}

const std::string kLinear = "[[model.layers]]\ntype = \"linear\"\nout_features = 32\n";
const std::string kRelu = "[[model.layers]]\ntype = \"relu\"\n";

}  // namespace

TEST_CASE("cuda launches: a linear layer is one kernel forward and two backward (bias in the GEMMs)",
          "[cuda][integration]") {
  REQUIRE_CUDA_DEVICES(1);
  fs::path d = fresh_dir("cuda_linear_launches");
  const auto base = steps_of(d, "base", "");
  if (!base) {
    WARN("no counts: the trainer binary is not the CUDA emulation build (counts come from tests/cuda_emu)");
    return;
  }
  // addmm: one cublasLtMatmul (BIAS); backward: mm for the input's gradient and one cublasLtMatmul
  // for the weight's, its BGRADB epilogue writing the bias gradient
  const Phases linear = per_layer(*base, *steps_of(d, "linear", kLinear));
  CHECK(linear.forward == 1.0);
  CHECK(linear.backward == 2.0);
  // Linear + ReLU run as addmm_relu (RELU_BIAS); the backward adds the relu's mask
  const Phases linear_relu = per_layer(*base, *steps_of(d, "linear_relu", kLinear + kRelu));
  CHECK(linear_relu.forward == 1.0);
  CHECK(linear_relu.backward == 3.0);
  // the composite (fusion off): matmul, then the add; the backward's sum for the bias gradient
  const std::string off = "--set run.fused_ops=false";
  const Phases composite = per_layer(*steps_of(d, "base_composite", "", off), *steps_of(d, "composite", kLinear, off));
  CHECK(composite.forward == 2.0);
  CHECK(composite.backward == 3.0);
}

}  // namespace test_cuda_linear_launches
