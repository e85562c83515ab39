// [run] attention: the path attention_qkvpacked takes per device type (backends::fused_attention),
// the key read from a config and an override, written back and applied by the run setup, and the
// error for a value it does not know.
#include <catch2/catch.hpp>
#include <fstream>
#include "config/run_config.h"
#include "ops/backends.h"
#include "train/run_setup.h"
#include "unit/error_of.h"
#include "unit/temp_dir.h"

namespace test_attention_path {

using namespace tr;
using Catch::Matchers::Contains;

namespace {

struct FusionGuard {
  backends::Fusion saved = backends::fusion();
  ~FusionGuard() { backends::fusion() = saved; }
};

config::RunConfig load(const TempDir& tmp, const std::string& run_keys, const std::vector<std::string>& sets = {}) {
  std::ofstream(tmp / "c.toml") << "[run]\n"
                                << run_keys
                                << "\n[model]\ninput = [4]\n[[model.layers]]\n"
                                   "type = \"linear\"\nout_features = 2\n[data]\ndataset = \"synthetic\"\n"
                                   "num_classes = 2\ntrain_size = 8\neval_size = 8\nbatch_size = 4\n";
  return config::load_run_config(tmp / "c.toml", sets);
}

}  // namespace

TEST_CASE("[run] attention: auto is the fused op on the CPU and on CUDA", "[attention][config]") {
  FusionGuard guard;
  using backends::AttentionPath;
  backends::fusion().enabled = true;
  backends::fusion().attention = AttentionPath::Auto;
  CHECK(backends::fused_attention(DeviceType::CPU));
  CHECK(backends::fused_attention(DeviceType::CUDA));
  backends::fusion().attention = AttentionPath::Fused;
  CHECK(backends::fused_attention(DeviceType::CPU));
  CHECK(backends::fused_attention(DeviceType::CUDA));
  backends::fusion().attention = AttentionPath::Composite;
  CHECK_FALSE(backends::fused_attention(DeviceType::CPU));
  CHECK_FALSE(backends::fused_attention(DeviceType::CUDA));
  // fused_ops = false: every fusion off, attention's too
  backends::fusion().enabled = false;
  backends::fusion().attention = AttentionPath::Fused;
  CHECK_FALSE(backends::fused_attention(DeviceType::CPU));
  CHECK_FALSE(backends::fused_attention(DeviceType::CUDA));
  CHECK(backends::attention_path("auto") == AttentionPath::Auto);
  CHECK(backends::attention_path("composite") == AttentionPath::Composite);
  CHECK_THROWS_WITH(backends::attention_path("flash"), Contains("'flash'") && Contains("auto, fused, composite"));
}

TEST_CASE("[run] attention: read, overridden, written back, and an unknown value named", "[attention][config]") {
  TempDir tmp;
  CHECK(load(tmp, "").run.attention == "auto");
  CHECK(load(tmp, "attention = \"fused\"").run.attention == "fused");
  const config::RunConfig c = load(tmp, "attention = \"fused\"", {"run.attention=composite"});
  CHECK(c.run.attention == "composite");
  CHECK_THAT(config::to_toml(c), Contains("attention = 'composite'") || Contains("attention = \"composite\""));
  const std::string e = test::error_of([&] { load(tmp, "attention = \"flash\""); });
  CHECK_THAT(e, Contains("c.toml:2:") && Contains("attention") && Contains("'flash'") && Contains("auto") &&
                    Contains("fused") && Contains("composite"));
  CHECK_THAT(test::error_of([&] { load(tmp, "", {"run.attention=fusd"}); }),
             Contains("attention") && Contains("did you mean 'fused'"));
}

TEST_CASE("[run] attention: the run setup applies it", "[attention][config]") {
  FusionGuard guard;
  TempDir tmp;
  {
    train::Run run(load(tmp, "attention = \"composite\"\ndevice = \"cpu\""));
    CHECK(backends::fusion().attention == backends::AttentionPath::Composite);
    CHECK_FALSE(backends::fused_attention(DeviceType::CPU));
  }
  train::Run run(load(tmp, "device = \"cpu\""));
  CHECK(backends::fusion().attention == backends::AttentionPath::Auto);
  CHECK(backends::fused_attention(DeviceType::CPU));
}

}  // namespace test_attention_path
