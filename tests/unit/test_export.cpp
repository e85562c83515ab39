// Exported weights against PyTorch: tests/fixtures/export_weights.safetensors (trainer's export of a
// run of export_run.toml) loaded by an independent Python reader into the equivalent torch module
// gives export_logits.json (generators/make_export_fixture.py); our model with the same weights must agree.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include "core/grad_mode.h"
#include "data/idx_dataset.h"
#include "io/safetensors.h"
#include "nn/model_file.h"
#include "ops/ops.h"

namespace test_export {

using namespace tr;

TEST_CASE("exported weights give PyTorch's logits", "[checkpoint][export]") {
  const std::string dir = TRAINER_FIXTURES_DIR;
  std::ifstream f(dir + "/export_logits.json");
  REQUIRE(f);
  nlohmann::json ref = nlohmann::json::parse(f);
  nn::Model m = nn::load_model_file(dir + "/export_model.toml");
  nn::StateDict sd;
  for (auto& [n, t] : io::load_safetensors(dir + "/export_weights.safetensors")) sd.emplace_back(n, t);
  m.net->load_state_dict(sd, true);
  m.net->eval();
  auto ds = data::IdxDataset::fashion_mnist(false, data::IdxDataset::Normalize{0.2860f, 0.3530f});
  int64_t n = ref.at("images").get<int64_t>();
  std::vector<Tensor> xs;
  for (int64_t i = 0; i < n; ++i) xs.push_back(ds.get(i).input.unsqueeze(0));
  NoGradGuard ng;
  Tensor logits = (*m.net)(cat(xs, 0));
  REQUIRE(logits.sizes() == Shape{n, 10});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < 10; ++j) {
      double want = ref["logits"][i][j].get<double>();
      INFO("image " << i << " class " << j);
      CHECK(logits.select(0, i).select(0, j).item() == Approx(want).epsilon(1e-5).margin(1e-6));
    }
}

}  // namespace test_export
