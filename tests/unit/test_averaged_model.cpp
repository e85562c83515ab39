// AveragedModel (lib/optim/averaged_model.h), the EMA of the weights, against torch 1.13's
// AveragedModel with the EMA avg_fn: tests/fixtures/ema_fixtures.json, made by generators/make_ema_fixtures.py.
#include <catch2/catch.hpp>
#include "unit/fixtures.h"
#include "core/grad_mode.h"
#include "nn/model_file.h"
#include "ops/ops.h"
#include "optim/averaged_model.h"
#include "optim/sgd.h"
#include "toml/toml_table.h"

namespace test_averaged_model {

using namespace tr;
using json = nlohmann::json;
using Catch::Matchers::Contains;

namespace {

// torch's nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(), nn.Linear(3, 2))
nn::ModulePtr tiny_model() {
  const char* src = R"(
input = [4]
[[layers]]
type = "linear"
out_features = 3
[[layers]]
type = "batch_norm1d"
[[layers]]
type = "relu"
[[layers]]
type = "linear"
out_features = 2
)";
  toml::table t = toml::parse(std::string_view(src), std::string_view("model.toml"));
  return nn::build_model(TomlTable(t, "model.toml", "model")).net;
}

// A fixture state ({name: flat values}) as a state_dict shaped like `like`'s.
nn::StateDict state_of(const json& flat, const nn::Module& like) {
  nn::StateDict sd;
  for (auto& [name, t] : like.state_dict())
    sd.emplace_back(name, from_vector(flat.at(name).get<std::vector<double>>(), t.sizes(), TensorOptions(t.dtype())));
  return sd;
}

// Every entry of `m`'s state_dict against the fixture's: exactly, or to rtol (with a floor at atol).
void check_state(const nn::Module& m, const json& want, double rtol) {
  for (auto& [name, t] : m.state_dict()) {
    std::vector<double> got = t.reshape({-1}).tolist(), w = want.at(name).get<std::vector<double>>();
    REQUIRE(got.size() == w.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO(name << "[" << i << "]");
      if (rtol == 0)
        CHECK(got[i] == w[i]);
      else
        CHECK(got[i] == Approx(w[i]).epsilon(rtol).margin(1e-6));
    }
  }
}

const json& fixture() { return fixture_json("ema_fixtures.json"); }

}  // namespace

TEST_CASE("AveragedModel: fed torch's weights, the EMA equals torch's bit for bit", "[optim][ema][torch]") {
  const json& f = fixture();
  nn::ModulePtr model = tiny_model();
  model->load_state_dict(state_of(f.at("init"), *model), true);
  optim::AveragedModel ema(tiny_model(), *model, f.at("decay").get<double>());
  check_state(ema.module(), f.at("init"), 0);  // a copy of the model at construction
  int64_t k = 0;
  for (const json& s : f.at("steps")) {
    INFO("after step " << ++k);
    model->load_state_dict(state_of(s.at("model"), *model), true);
    ema.update_parameters(*model);
    CHECK(ema.n_averaged() == s.at("n_averaged").get<int64_t>());
    check_state(ema.module(), s.at("ema"), 0);
  }
  // the average does not alias the model
  CHECK_FALSE(ema.module().parameters()[0].is_same(model->parameters()[0]));
}

TEST_CASE("AveragedModel: SGD steps with an EMA follow torch's", "[optim][ema][torch]") {
  const json& f = fixture();
  nn::ModulePtr model = tiny_model();
  model->load_state_dict(state_of(f.at("init"), *model), true);
  optim::AveragedModel ema(tiny_model(), *model, f.at("decay").get<double>());
  optim::SGD opt(model->parameters(),
                 optim::SGDOptions{.lr = f.at("lr").get<double>(), .momentum = f.at("momentum").get<double>()});
  const json& batches = f.at("batches");
  const json& steps = f.at("steps");
  for (size_t k = 0; k < batches.size(); ++k) {
    INFO("step " << k + 1);
    const auto y = batches[k].at("y").get<std::vector<double>>();
    Tensor x = from_vector(batches[k].at("x").get<std::vector<double>>(), {int64_t(y.size()), 4});
    Tensor t = from_vector(y, {int64_t(y.size())}, TensorOptions(DType::I64));
    opt.zero_grad();
    cross_entropy((*model)(x), t).backward();
    opt.step();
    ema.update_parameters(*model);
    check_state(*model, steps[k].at("model"), 1e-5);
    check_state(ema.module(), steps[k].at("ema"), 1e-5);
  }
}

TEST_CASE("AveragedModel: running statistics are averaged, counters copied, errors", "[optim][ema]") {
  nn::ModulePtr model = tiny_model();
  optim::AveragedModel ema(tiny_model(), *model, 0.5);
  auto entry = [](const nn::Module& m, const std::string& name) {
    for (auto& [n, t] : m.state_dict())
      if (n == name) return t.reshape({-1}).tolist();
    FAIL("no " << name);
    return std::vector<double>{};
  };
  auto set = [&](double v, double count) {
    NoGradGuard ng;
    for (auto& p : model->parameters()) p.fill_(v);
    for (auto& [n, b] : model->named_buffers()) b.fill_(n == "1.num_batches_tracked" ? count : v + 1);
  };
  set(2.0, 5);
  ema.update_parameters(*model);  // the first update copies
  CHECK(entry(ema.module(), "0.weight") == std::vector<double>(12, 2.0));
  CHECK(entry(ema.module(), "1.running_mean") == std::vector<double>{3, 3, 3});
  CHECK(entry(ema.module(), "1.num_batches_tracked") == std::vector<double>{5});
  set(4.0, 7);
  ema.update_parameters(*model);  // 0.5 * 2 + 0.5 * 4; statistics 0.5 * 3 + 0.5 * 5; the counter copied
  CHECK(entry(ema.module(), "0.weight") == std::vector<double>(12, 3.0));
  CHECK(entry(ema.module(), "1.running_var") == std::vector<double>{4, 4, 4});
  CHECK(entry(ema.module(), "1.num_batches_tracked") == std::vector<double>{7});
  CHECK(ema.n_averaged() == 2);

  nn::ModulePtr other = std::make_shared<nn::Module>("Empty");
  CHECK_THROWS_WITH(optim::AveragedModel(other, *model, 0.9), Contains("AveragedModel") && Contains("parameters"));
  CHECK_THROWS_WITH(optim::AveragedModel(tiny_model(), *model, 1.0), Contains("decay must be in [0, 1)"));
}

}  // namespace test_averaged_model
