// lib/optim: every registered optimizer's trajectories equal torch 1.13's (tests/fixtures/optim_fixtures.json,
// written by generators/make_optim_fixtures.py), the Optimizer base (groups, defaults, step_count,
// zero_grad), state in torch's state_dict layout (export, import, round trip, errors), param groups
// from rules (yolov5's grouping, TOML parsing and its errors), clip_grad_norm / clip_grad_value.
#include <catch2/catch.hpp>
#include "unit/fixtures.h"
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include "core/grad_mode.h"
#include "nn/layers/tanh.h"
#include "nn/layers/linear.h"
#include "nn/layers/sequential.h"
#include "nn/model_file.h"
#include "ops/ops.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/optimizer_registry.h"
#include "optim/optimizer_state.h"
#include "optim/param_groups.h"
#include "optim/sgd.h"
#include "ops/fused_optim.h"
#include <functional>

namespace test_optim {

using json = nlohmann::json;
using namespace tr;
using Catch::Matchers::Contains;

namespace {

const json& fixtures() { return fixture_json("optim_fixtures.json"); }

DType dtype_of_name(const std::string& s) { return s == "float64" ? DType::F64 : DType::F32; }

// The fixtures' model: Linear(4,3) Tanh Linear(3,2), with torch's initial weights.
std::shared_ptr<nn::Sequential> make_model(DType dt) {
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(4, 3));
  m->push_back(std::make_shared<nn::Tanh>());
  m->push_back(std::make_shared<nn::Linear>(3, 2));
  m->to(dt);
  NoGradGuard ng;
  for (auto& [name, p] : m->named_parameters())
    p.copy_(from_vector(fixtures().at("init").at(name).get<std::vector<double>>(), p.sizes(), dt));
  return m;
}

struct Batch {
  Tensor x, y;
};
Batch batch(size_t k, DType dt) {
  const json& b = fixtures().at("batches").at(k);
  return {from_vector(b.at("x").get<std::vector<double>>(), {5, 4}, dt),
          from_vector(b.at("y").get<std::vector<double>>(), {5, 2}, dt)};
}

void train_step(nn::Module& m, optim::Optimizer& opt, const Batch& b) {
  opt.zero_grad();
  Tensor loss = mse_loss(m(b.x), b.y);
  loss.backward();
  opt.step();
}

std::vector<double> flat_params(const nn::Module& m) {
  std::vector<double> r;
  for (auto& p : m.parameters())
    for (double v : p.tolist()) r.push_back(v);
  return r;
}

// Options from torch's keyword arguments (betas -> beta1/beta2, booleans -> 0/1).
optim::Options options_of(const json& kw) {
  optim::Options o;
  for (auto& [k, v] : kw.items()) {
    if (k == "params") continue;
    if (k == "betas") {
      o["beta1"] = v.at(0).get<double>();
      o["beta2"] = v.at(1).get<double>();
    } else if (v.is_boolean()) {
      o[k] = v.get<bool>() ? 1.0 : 0.0;
    } else {
      o[k] = v.get<double>();
    }
  }
  return o;
}

// The fixture case's optimizer, built through the registry as [optimizer] builds it: every
// hyperparameter at its registered default unless the case's torch keyword arguments set it.
std::unique_ptr<optim::Optimizer> make_optimizer(const json& c, nn::Module& m) {
  const optim::OptimizerType& type = Registry<optim::OptimizerType>::get().at(c.at("optimizer").get<std::string>());
  optim::Options defaults;
  for (const optim::Hyperparameter& h : type.hyperparameters) {
    const std::vector<std::string> keys = h.option_keys();
    for (size_t i = 0; i < keys.size(); ++i) defaults[keys[i]] = h.dflt[i];
  }
  for (auto& [k, v] : options_of(c.at("defaults"))) defaults[k] = v;
  std::vector<optim::ParamGroup> groups;
  if (c.at("groups").is_null()) {
    groups.push_back({m.parameters(), {}, "default"});
  } else {
    nn::NamedTensors named = m.named_parameters();
    for (auto& g : c.at("groups")) {
      optim::ParamGroup pg;
      for (auto& n : g.at("params"))
        for (auto& [name, p] : named)
          if (name == n.get<std::string>()) pg.params.push_back(p);
      pg.options = options_of(g);
      groups.push_back(pg);
    }
  }
  return type.build(groups, defaults);
}

// "" when every |a - b| <= atol + rtol |b|, else the first offending element.
std::string compare(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol) {
  if (got.size() != want.size()) return str("size ", got.size(), " vs ", want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i])))
      return str("element ", i, ": ", got[i], " vs torch ", want[i]);
  return "";
}

const json& fixture_case(const std::string& name) {
  for (auto& c : fixtures().at("cases"))
    if (c.at("name") == name) return c;
  throw std::runtime_error("no fixture case " + name);
}

Tensor param_with_grad(std::initializer_list<double> v, std::initializer_list<double> g) {
  Tensor p = tensor(v).requires_grad_(true);
  p.set_grad(tensor(g));
  return p;
}

}  // namespace

// ---------------------------------------------------------------- torch trajectories

TEST_CASE("optim: every registered optimizer follows torch 1.13 step by step (optim_fixtures.json)", "[optim][torch]") {
  const json& cases = fixtures().at("cases");
  // every registered optimizer has its torch trajectories (a new one adds its cases to
  // make_optim_fixtures.py; this test runs them through the registry)
  std::set<std::string> covered;
  for (auto& c : cases) covered.insert(c.at("optimizer").get<std::string>());
  for (const std::string& type : Registry<optim::OptimizerType>::get().names()) {
    INFO("optimizer " << type << " has no case in optim_fixtures.json");
    CHECK(covered.count(type) == 1);
  }
  for (auto& c : cases) {
    std::string name = c.at("name");
    INFO("case " << name);
    DType dt = dtype_of_name(c.at("dtype"));
    double rtol = dt == DType::F64 ? 1e-12 : 1e-5, atol = dt == DType::F64 ? 1e-14 : 1e-7;
    auto m = make_model(dt);
    auto opt = make_optimizer(c, *m);
    const json& steps = c.at("steps");
    REQUIRE(steps.size() == fixtures().at("batches").size());
    for (size_t k = 0; k < steps.size(); ++k) {
      INFO("after step " << k + 1);
      train_step(*m, *opt, batch(k, dt));
      REQUIRE(compare(flat_params(*m), steps[k].get<std::vector<double>>(), rtol, atol) == "");
    }
    CHECK(opt->step_count() == int64_t(steps.size()));
  }
}

TEST_CASE("optim: state_dict has torch's layout and values", "[optim][torch]") {
  int checked = 0;
  for (auto& c : fixtures().at("cases")) {
    if (c.at("state_dict").is_null()) continue;
    INFO("case " << c.at("name").get<std::string>());
    ++checked;
    DType dt = dtype_of_name(c.at("dtype"));
    auto m = make_model(dt);
    auto opt = make_optimizer(c, *m);
    for (size_t k = 0; k < c.at("steps").size(); ++k) train_step(*m, *opt, batch(k, dt));
    optim::OptimizerState s = optim::state_dict(*opt);
    const json& want = c.at("state_dict");

    REQUIRE(s.param_groups.size() == want.at("param_groups").size());
    for (size_t g = 0; g < s.param_groups.size(); ++g) {
      const json& tg = want.at("param_groups")[g];
      const json& our = s.param_groups[g];
      for (auto& [k, v] : tg.items()) {
        INFO("group " << g << " key " << k);
        REQUIRE(our.contains(k));
        if (k == "foreach") continue;  // the fixture forced foreach=False; torch's default is None
        if (v.is_array() && k == "betas")
          CHECK(our[k].get<std::vector<double>>() == v.get<std::vector<double>>());
        else if (v.is_number())
          CHECK(our[k].get<double>() == v.get<double>());
        else
          CHECK(our[k] == v);
      }
      for (auto& [k, v] : our.items()) CHECK((tg.contains(k) || k == "name"));
    }
    std::set<std::string> want_names;
    for (auto& [idx, st] : want.at("state").items())
      for (auto& [key, t] : st.items()) {
        if (t.is_null()) continue;  // torch's momentum_buffer None
        std::string n = "state." + idx + "." + key;
        want_names.insert(n);
        INFO(n);
        REQUIRE(s.tensors.count(n));
        const Tensor& ours = s.tensors.at(n);
        CHECK(ours.sizes() == t.at("shape").get<Shape>());
        CHECK(compare(ours.tolist(), t.at("values").get<std::vector<double>>(), 1e-12, 1e-15) == "");
        if (key == "step") CHECK(ours.dtype() == DType::F32);
      }
    for (auto& [n, t] : s.tensors) CHECK(want_names.count(n));
  }
  CHECK(checked == 6);
}

// ---------------------------------------------------------------- Optimizer base

TEST_CASE("optim: group hyperparameters default, unknown keys are errors", "[optim]") {
  Tensor a = zeros({2}).requires_grad_(true), b = zeros({3}).requires_grad_(true), c = zeros({1}).requires_grad_(true);
  optim::SGDOptions d;
  d.lr = 0.1;
  d.momentum = 0.9;
  optim::SGD opt({{{a}, {}, "default"}, {{b}, {{"lr", 0.01}, {"weight_decay", 1e-4}}, "decay"}}, d);
  REQUIRE(opt.param_groups().size() == 2);
  CHECK(opt.param_groups()[0].options.at("lr") == 0.1);
  CHECK(opt.param_groups()[0].options.at("momentum") == 0.9);
  CHECK(opt.param_groups()[1].options.at("lr") == 0.01);
  CHECK(opt.param_groups()[1].options.at("momentum") == 0.9);  // from the defaults
  CHECK(opt.param_groups()[1].options.at("weight_decay") == 1e-4);
  CHECK(opt.lrs() == std::vector<double>{0.1, 0.01});

  opt.add_param_group({{c}, {{"dampening", 0.5}}, ""});
  CHECK(opt.param_groups()[2].name == "2");
  CHECK(opt.param_groups()[2].options.at("lr") == 0.1);
  CHECK(opt.params().size() == 3);

  Tensor e = zeros({1}).requires_grad_(true);
  CHECK_THROWS_WITH(opt.add_param_group({{e}, {{"betas", 0.9}}, "bad"}),
                    Contains("unknown hyperparameter 'betas'") && Contains("'bad'") && Contains("momentum") &&
                        Contains("weight_decay"));
  CHECK_THROWS_WITH(opt.add_param_group({{e}, {{"weight_decy", 0.0}}, "typo"}),
                    Contains("did you mean 'weight_decay'"));
  CHECK_THROWS_WITH(opt.add_param_group({{a}, {}, "again"}), Contains("more than one parameter group"));
  CHECK_THROWS_WITH(opt.add_param_group({{e * 2.0}, {}, "nonleaf"}), Contains("leaf"));
  CHECK(opt.param_groups().size() == 3);

  Tensor f = zeros({1}).requires_grad_(true);
  CHECK_THROWS_WITH(optim::Adam({{{f}, {{"momentum", 0.9}}, "g"}}, optim::AdamOptions{}),
                    Contains("Adam: unknown hyperparameter 'momentum'") && Contains("beta1"));
}

TEST_CASE("optim: hyperparameter ranges are checked for the defaults and every group", "[optim]") {
  Tensor a = zeros({2}).requires_grad_(true);
  optim::SGDOptions bad;
  bad.lr = -1;
  CHECK_THROWS_WITH(optim::SGD(std::vector<Tensor>{a}, bad), Contains("invalid learning rate"));
  optim::SGDOptions nest;
  nest.nesterov = true;
  CHECK_THROWS_WITH(optim::SGD(std::vector<Tensor>{a}, nest), Contains("Nesterov momentum requires"));
  CHECK_THROWS_WITH(optim::SGD({{{a}, {{"momentum", -0.5}}, "neg"}}, optim::SGDOptions{}),
                    Contains("'neg'") && Contains("invalid momentum"));
  optim::AdamOptions ab;
  ab.beta2 = 1.0;
  CHECK_THROWS_WITH(optim::Adam({{{a}, {}, "g"}}, ab), Contains("invalid beta parameter at index 1"));
  CHECK_THROWS_WITH(optim::AdamW({{{a}, {{"eps", -1}}, "g"}}, optim::AdamOptions{}),
                    Contains("AdamW") && Contains("invalid epsilon"));
}

TEST_CASE("optim: step_count, zero_grad and parameters without gradients", "[optim]") {
  Tensor a = tensor({1.0, 2.0}).requires_grad_(true);
  Tensor b = tensor({3.0}).requires_grad_(true);  // never gets a gradient
  optim::AdamOptions o;
  o.lr = 0.1;
  optim::Adam opt({{{a, b}, {}, "default"}}, o);
  CHECK(opt.step_count() == 0);
  for (int i = 0; i < 3; ++i) {
    opt.zero_grad();
    (a * a).sum().backward();
    opt.step();
  }
  CHECK(opt.step_count() == 3);
  CHECK(b.tolist() == std::vector<double>{3.0});  // skipped
  CHECK(opt.find_state(b) == nullptr);            // and no state created for it
  REQUIRE(opt.find_state(a) != nullptr);
  CHECK(opt.find_state(a)->at("step").item() == 3.0);

  // set_to_none (torch's default) drops the gradient; otherwise it is zeroed in place
  REQUIRE(a.grad().defined());
  Tensor g = a.grad();
  opt.zero_grad(false);
  REQUIRE(a.grad().defined());
  CHECK(a.grad().tolist() == std::vector<double>{0.0, 0.0});
  CHECK(g.tolist() == std::vector<double>{0.0, 0.0});  // the same storage
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
  CHECK_FALSE(b.grad().defined());
  opt.step();  // nothing has a gradient: no update, but the call counts
  CHECK(opt.step_count() == 4);
  CHECK(opt.find_state(a)->at("step").item() == 3.0);
}

TEST_CASE("optim: the seeds' SGD example with the learning rate changed between steps", "[optim][seeds]") {
  // LambdaLR(lambda e: (e+1)**2) over lr 0.1: steps with lr 0.1, 0.4, 0.9 on y = sum(x)
  Tensor x = tensor({1.0, 2.0}).requires_grad_(true);
  optim::SGDOptions o;
  o.lr = 0.1;
  optim::SGD opt(std::vector<Tensor>{x}, o);
  std::vector<std::vector<double>> want{{0.9, 1.9}, {0.5, 1.5}, {-0.4, 0.6}};
  for (int i = 0; i < 3; ++i) {
    opt.param_groups()[0].options["lr"] = 0.1 * (i + 1) * (i + 1);
    opt.zero_grad();
    x.sum().backward();
    CHECK(x.grad().tolist() == std::vector<double>{1.0, 1.0});
    opt.step();
    CHECK(compare(x.tolist(), want[i], 1e-6, 1e-6) == "");
  }
}

// ---------------------------------------------------------------- state round trip

TEST_CASE("optim: state_dict -> load_state_dict continues bit for bit", "[optim]") {
  for (std::string name : {"sgd_nesterov_float64", "sgd_groups_float32", "adam_amsgrad_float64", "adamw_plain_float32",
                           "adam_groups_float64", "sgd_plain_float64"}) {
    INFO(name);
    const json& c = fixture_case(name);
    DType dt = dtype_of_name(c.at("dtype"));
    auto m1 = make_model(dt);
    auto opt1 = make_optimizer(c, *m1);
    for (size_t k = 0; k < 5; ++k) train_step(*m1, *opt1, batch(k, dt));
    // a changed learning rate (as a scheduler would leave it) travels with the state
    opt1->param_groups()[0].options["lr"] *= 0.5;

    auto m2 = make_model(dt);
    {
      NoGradGuard ng;
      auto p1 = m1->parameters(), p2 = m2->parameters();
      for (size_t i = 0; i < p1.size(); ++i) p2[i].copy_(p1[i]);
    }
    auto opt2 = make_optimizer(c, *m2);
    optim::OptimizerState s = optim::state_dict(*opt1);
    // through JSON text, as a checkpoint stores it
    s.param_groups = json::parse(s.param_groups.dump());
    optim::load_state_dict(*opt2, s);
    CHECK(opt2->step_count() == 5);
    CHECK(opt2->lrs() == opt1->lrs());
    for (size_t k = 5; k < 10; ++k) {
      train_step(*m1, *opt1, batch(k, dt));
      train_step(*m2, *opt2, batch(k, dt));
    }
    auto p1 = m1->parameters(), p2 = m2->parameters();
    for (size_t i = 0; i < p1.size(); ++i) CHECK(equal(p1[i], p2[i]));
    // the loaded state is a copy: opt2's tensors are not opt1's
    for (auto& [n, t] : optim::state_dict(*opt2).tensors)
      CHECK_FALSE(t.is_same(optim::state_dict(*opt1).tensors.at(n)));
  }
}

TEST_CASE("optim: load_state_dict errors name the group, index and key", "[optim]") {
  const json& c = fixture_case("adam_amsgrad_float64");
  auto m = make_model(DType::F64);
  auto opt = make_optimizer(c, *m);
  for (size_t k = 0; k < 2; ++k) train_step(*m, *opt, batch(k, DType::F64));
  const optim::OptimizerState good = optim::state_dict(*opt);
  auto fresh = [&] {
    static std::shared_ptr<nn::Sequential> mm;
    mm = make_model(DType::F64);
    return make_optimizer(c, *mm);
  };

  {
    optim::OptimizerState s = good;
    s.param_groups.push_back(s.param_groups[0]);
    CHECK_THROWS_WITH(optim::load_state_dict(*fresh(), s), Contains("2 param groups saved, the optimizer has 1"));
  }
  {
    optim::OptimizerState s = good;
    s.param_groups[0]["params"].erase(3);
    CHECK_THROWS_WITH(optim::load_state_dict(*fresh(), s),
                      Contains("param group 0 ('default')") && Contains("3 parameters saved") && Contains("has 4"));
  }
  {
    optim::OptimizerState s = good;
    s.tensors["state.1.exp_avg"] = zeros({4}, DType::F64);
    CHECK_THROWS_WITH(optim::load_state_dict(*fresh(), s),
                      Contains("state.1.exp_avg") && Contains("[4]") && Contains("[3]"));
  }
  {
    optim::OptimizerState s = good;
    s.tensors.erase("state.2.exp_avg_sq");
    CHECK_THROWS_WITH(optim::load_state_dict(*fresh(), s), Contains("state.2.exp_avg_sq is missing"));
  }
  {
    optim::OptimizerState s = good;
    s.tensors["state.0.momentum_buffer"] = zeros({3, 4}, DType::F64);
    CHECK_THROWS_WITH(optim::load_state_dict(*fresh(), s),
                      Contains("state.0.momentum_buffer") && Contains("keeps no 'momentum_buffer'"));
  }
  {
    optim::OptimizerState s = good;
    s.tensors["state.7.exp_avg"] = zeros({2}, DType::F64);
    CHECK_THROWS_WITH(optim::load_state_dict(*fresh(), s), Contains("state.7.exp_avg: no parameter has index 7"));
  }
  {
    optim::OptimizerState s = good;
    s.tensors["exp_avg"] = zeros({2}, DType::F64);
    CHECK_THROWS_WITH(optim::load_state_dict(*fresh(), s), Contains("malformed tensor name 'exp_avg'"));
  }
  {
    optim::OptimizerState s = good;
    s.param_groups[0]["momentum"] = 0.9;
    CHECK_THROWS_WITH(optim::load_state_dict(*fresh(), s), Contains("hyperparameter 'momentum' is not one of Adam's"));
  }
  {  // amsgrad off in the saved group: max_exp_avg_sq is not a state key any more
    optim::OptimizerState s = good;
    s.param_groups[0]["amsgrad"] = false;
    CHECK_THROWS_WITH(optim::load_state_dict(*fresh(), s), Contains("keeps no 'max_exp_avg_sq'"));
  }
  // a failed load leaves the optimizer as it was
  auto o = fresh();
  optim::OptimizerState s = good;
  s.tensors.erase("state.3.step");
  CHECK_THROWS(optim::load_state_dict(*o, s));
  CHECK(optim::state_dict(*o).tensors.empty());
  CHECK(o->step_count() == 0);
  // SGD state into Adam
  const json& cs = fixture_case("sgd_momentum_float64");
  auto ms = make_model(DType::F64);
  auto sgd = make_optimizer(cs, *ms);
  train_step(*ms, *sgd, batch(0, DType::F64));
  CHECK_THROWS_WITH(optim::load_state_dict(*fresh(), optim::state_dict(*sgd)), Contains("is not one of Adam's"));
}

TEST_CASE("optim: load_state_dict casts state to the parameter's dtype, keeps step", "[optim]") {
  const json& c = fixture_case("adam_plain_float64");
  auto m = make_model(DType::F64);
  auto opt = make_optimizer(c, *m);
  train_step(*m, *opt, batch(0, DType::F64));
  auto m32 = make_model(DType::F32);
  auto opt32 = make_optimizer(c, *m32);
  optim::load_state_dict(*opt32, optim::state_dict(*opt));
  auto s = optim::state_dict(*opt32);
  CHECK(s.tensors.at("state.0.exp_avg").dtype() == DType::F32);
  CHECK(s.tensors.at("state.0.step").dtype() == DType::F32);
  CHECK(s.tensors.at("state.0.step").item() == 1.0);
}

// ---------------------------------------------------------------- param groups from rules

namespace {

nn::Model small_cnn() {
  const char* src = R"(
input = [1, 6, 6]
[[layers]]
type = "conv2d"
out_channels = 4
kernel_size = 3
[[layers]]
type = "batch_norm2d"
[[layers]]
type = "relu"
[[layers]]
type = "flatten"
[[layers]]
type = "linear"
out_features = 8
[[layers]]
type = "layer_norm"
[[layers]]
type = "linear"
out_features = 3
bias = false
)";
  toml::table t = toml::parse(std::string_view(src), std::string_view("model.toml"));
  return nn::build_model(TomlTable(t, "model.toml", "model"));
}

std::vector<std::string> names_in(const nn::Module& m, const optim::ParamGroup& g) {
  std::vector<std::string> r;
  for (auto& p : g.params)
    for (auto& [n, t] : m.named_parameters())
      if (t.is_same(p)) r.push_back(n);
  return r;
}

std::vector<optim::GroupRule> parse_rules(const std::string& src, const std::string& type = "sgd") {
  static toml::table doc;  // the rules' TOML nodes must outlive the parse for error locations
  doc = toml::parse(std::string_view(src), std::string_view("run.toml"));
  const toml::array* a = doc["optimizer"]["groups"].as_array();
  REQUIRE(a != nullptr);
  return optim::parse_group_rules(*a, "run.toml", type);
}

}  // namespace

TEST_CASE("param groups: yolov5's grouping (biases and norm weights without weight decay)", "[optim][param_groups]") {
  nn::Model model = small_cnn();
  auto& net = *model.net;
  using V = std::vector<std::string>;
  REQUIRE(names_in(net, {net.parameters(), {}, ""}) ==
          V{"0.weight", "0.bias", "1.weight", "1.bias", "4.weight", "4.bias", "5.weight", "5.bias", "6.weight"});

  // yolov5: g0 = BatchNorm weights, g1 = other weights (decay), g2 = every bias
  V g0, g1, g2;
  for (auto& [path, mod] : net.named_modules()) {
    std::string pre = path.empty() ? "" : path + ".";
    for (auto& [n, t] : mod->named_parameters(false)) {
      if (n == "bias")
        g2.push_back(pre + n);
      else if (n == "weight" && (mod->type_name() == "BatchNorm2d" || mod->type_name() == "LayerNorm"))
        g0.push_back(pre + n);
      else if (n == "weight")
        g1.push_back(pre + n);
    }
  }

  std::vector<std::string> warnings;
  auto rules = parse_rules(R"(
[optimizer]
type = "sgd"
[[optimizer.groups]]
name = "norm_weight"
modules = ["batch_norm2d", "LayerNorm"]
param_names = ["weight"]
weight_decay = 0.0
[[optimizer.groups]]
name = "bias"
param_names = ["bias"]
weight_decay = 0
)",
                           "sgd");
  auto groups = optim::build_param_groups(net, rules, &warnings);
  CHECK(warnings.empty());
  REQUIRE(groups.size() == 3);
  CHECK(groups[0].name == "default");
  CHECK(groups[1].name == "norm_weight");
  CHECK(groups[2].name == "bias");
  CHECK(names_in(net, groups[0]) == g1);
  CHECK(names_in(net, groups[1]) == g0);
  CHECK(names_in(net, groups[2]) == g2);
  CHECK(groups[0].options.empty());
  CHECK(groups[1].options == optim::Options{{"weight_decay", 0.0}});

  optim::SGDOptions d;
  d.lr = 0.01;
  d.momentum = 0.937;
  d.nesterov = true;
  d.weight_decay = 5e-4;
  optim::SGD opt(groups, d);
  CHECK(opt.param_groups()[0].options.at("weight_decay") == 5e-4);
  CHECK(opt.param_groups()[1].options.at("weight_decay") == 0.0);
  CHECK(opt.param_groups()[2].options.at("weight_decay") == 0.0);
  CHECK(opt.param_groups()[2].options.at("momentum") == 0.937);
  // every parameter is in exactly one group
  CHECK(opt.params().size() == net.parameters().size());

  // the same with globs: match on names and module kinds
  auto rules2 = parse_rules(R"(
[[optimizer.groups]]
name = "no_decay"
match = ["*.bias"]
modules = ["*norm*"]
weight_decay = 0.0
)");
  auto groups2 = optim::build_param_groups(net, rules2, &warnings);
  CHECK(warnings.empty());
  CHECK(names_in(net, groups2[0]) == g1);
  CHECK(names_in(net, groups2[1]) == V{"0.bias", "1.weight", "1.bias", "4.bias", "5.weight", "5.bias"});
}

TEST_CASE("param groups: conflicts, empty groups and unknown module kinds", "[optim][param_groups]") {
  nn::Model model = small_cnn();
  auto& net = *model.net;
  optim::GroupRule biases{"biases", {{"*.bias"}, {}, {}}, {{"weight_decay", 0.0}}};
  optim::GroupRule bn{"bn", {{}, {"batch_norm2d"}, {}}, {{"lr", 0.1}}};
  CHECK_THROWS_WITH(optim::build_param_groups(net, {biases, bn}),
                    Contains("parameter '1.bias' is claimed by param groups 'biases' and 'bn'"));

  std::vector<std::string> warnings;
  optim::GroupRule emb{"emb", {{"*.embedding*"}, {"embedding"}, {}}, {}};
  auto groups = optim::build_param_groups(net, {emb}, &warnings);
  REQUIRE(groups.size() == 2);
  CHECK(groups[1].params.empty());
  CHECK(groups[0].params.size() == net.parameters().size());
  REQUIRE(warnings.size() == 2);
  CHECK_THAT(warnings[0], Contains("'*.embedding*' matches no parameter"));
  CHECK_THAT(warnings[1], Contains("param group 'emb' is empty"));

  warnings.clear();
  optim::GroupRule all{"all", {{"*"}, {}, {}}, {}};
  groups = optim::build_param_groups(net, {all}, &warnings);
  CHECK(groups[0].params.empty());
  CHECK(groups[1].params.size() == net.parameters().size());
  CHECK(warnings == std::vector<std::string>{"param group 'default' is empty: the rules claim every parameter"});

  optim::GroupRule typo{"t", {{}, {"batchnorm_2"}, {}}, {}};
  CHECK_THROWS_WITH(optim::build_param_groups(net, {typo}),
                    Contains("unknown module kind 'batchnorm_2'") && Contains("did you mean"));
  optim::GroupRule none{"none", {{}, {}, {}}, {{"lr", 1.0}}};
  CHECK_THROWS_WITH(optim::build_param_groups(net, {none}), Contains("selects no parameters"));
  CHECK_THROWS_WITH(optim::build_param_groups(net, {biases, biases}), Contains("two param groups are named 'biases'"));
  optim::GroupRule dflt{"default", {{"*"}, {}, {}}, {}};
  CHECK_THROWS_WITH(optim::build_param_groups(net, {dflt}), Contains("reserved"));

  // '*' matches dots; '?' and classes work; param_names restricts
  optim::GroupRule first{"first", {{"[04].*"}, {}, {"weight"}}, {}};
  groups = optim::build_param_groups(net, {first});
  CHECK(names_in(net, groups[1]) == std::vector<std::string>{"0.weight", "4.weight"});
  optim::GroupRule lin{"lin", {{}, {"linear"}, {}}, {}};
  groups = optim::build_param_groups(net, {lin});
  CHECK(names_in(net, groups[1]) == std::vector<std::string>{"4.weight", "4.bias", "6.weight"});
}

TEST_CASE("param groups: parse_group_rules reads hyperparameters and reports errors with locations",
          "[optim][param_groups]") {
  auto rules = parse_rules(R"(
[[optimizer.groups]]
name = "head"
match = "6.*"
lr = 1e-4
betas = [0.5, 0.9]
eps = 1e-6
amsgrad = true
maximize = false
weight_decay = 1
[[optimizer.groups]]
param_names = ["bias"]
)",
                           "adamw");
  REQUIRE(rules.size() == 2);
  CHECK(rules[0].name == "head");
  CHECK(rules[0].select.match == std::vector<std::string>{"6.*"});
  CHECK(rules[0].options == optim::Options{{"lr", 1e-4},
                                           {"beta1", 0.5},
                                           {"beta2", 0.9},
                                           {"eps", 1e-6},
                                           {"amsgrad", 1.0},
                                           {"maximize", 0.0},
                                           {"weight_decay", 1.0}});
  CHECK(rules[1].name == "group2");
  CHECK(rules[1].options.empty());

  auto sgd = parse_rules(R"(
[[optimizer.groups]]
name = "a"
modules = ["linear"]
momentum = 0.5
dampening = 0.1
nesterov = false
)",
                         "sgd");
  CHECK(sgd[0].options == optim::Options{{"momentum", 0.5}, {"dampening", 0.1}, {"nesterov", 0.0}});

  auto err = [](const std::string& body, const std::string& type = "sgd") {
    try {
      parse_rules("[[optimizer.groups]]\n" + body, type);
    } catch (const Error& e) { return std::string(e.what()); }
    return std::string("no error");
  };
  CHECK_THAT(err("name = 'x'\nmatch = ['*']\nweight_decy = 0.1\n"), Contains("run.toml:4:1") &&
                                                                        Contains("unknown key 'weight_decy'") &&
                                                                        Contains("did you mean 'weight_decay'"));
  CHECK_THAT(err("name = 'x'\nmatch = ['*']\nbetas = [0.9, 0.99]\n"),
             Contains("run.toml:4:") && Contains("'betas' is not a hyperparameter of sgd"));
  CHECK_THAT(err("name = 'x'\nmatch = ['*']\nmomentum = 0.9\n", "adam"),
             Contains("'momentum' is not a hyperparameter of adam"));
  CHECK_THAT(err("name = 'x'\nmatch = ['*']\nbetas = [0.9]\n", "adam"), Contains("list of two numbers"));
  CHECK_THAT(err("name = 'x'\nmatch = ['*']\nbetas = [0.9, 1.0]\n", "adam"), Contains("beta2 must be in [0, 1)"));
  CHECK_THAT(err("name = 'x'\nmatch = ['*']\nlr = -1\n"), Contains("'lr' must be >= 0"));
  CHECK_THAT(err("name = 'x'\nmatch = ['*']\nnesterov = 1\n"), Contains("'nesterov' must be a boolean"));
  CHECK_THAT(err("name = 'x'\nlr = 0.1\n"), Contains("run.toml:1:1") && Contains("selects no parameters"));
  CHECK_THAT(err("name = 'default'\nmatch = ['*']\n"), Contains("reserved"));
  CHECK_THAT(err("name = 'x'\nmatch = ['*']\n[[optimizer.groups]]\nname = 'x'\nmatch = ['*']\n"),
             Contains("run.toml:5:") && Contains("used by another param group"));
  CHECK_THAT(err("name = 'x'\nmatch = [1]\n"), Contains("'match' must be a list of strings"));
  // a name no optimizer will take (rmsprop is the contributing recipe's example of a new one)
  CHECK_THAT(err("name = 'x'\nmatch = ['*']\n", "no_such_optimizer"),
             Contains("unknown optimizer 'no_such_optimizer'") && Contains("known: adam, adamw"));
}

// ---------------------------------------------------------------- gradient clipping

TEST_CASE("clip_grad_norm: equals torch's clip_grad_norm_ (optim_fixtures.json)", "[optim][clip][torch]") {
  const json& cases = fixtures().at("clip");
  REQUIRE(cases.size() == 20);
  for (auto& c : cases) {
    DType dt = dtype_of_name(c.at("dtype"));
    double norm_type = c.at("norm_type").is_string() ? INFINITY : c.at("norm_type").get<double>();
    double max_norm = c.at("max_norm");
    INFO(c.at("dtype").get<std::string>() << " norm_type " << norm_type << " max_norm " << max_norm);
    double rtol = dt == DType::F64 ? 1e-12 : 1e-5, atol = dt == DType::F64 ? 1e-15 : 1e-7;
    std::vector<Tensor> params;
    for (size_t i = 0; i < c.at("shapes").size(); ++i) {
      Shape s = c.at("shapes")[i].get<Shape>();
      Tensor p = zeros(s, dt).requires_grad_(true);
      if (!c.at("grads")[i].is_null()) p.set_grad(from_vector(c.at("grads")[i].get<std::vector<double>>(), s, dt));
      params.push_back(p);
    }
    double total = optim::clip_grad_norm(params, max_norm, norm_type);
    CHECK(compare({total}, {c.at("total_norm").get<double>()}, rtol, 0) == "");
    for (size_t i = 0; i < params.size(); ++i) {
      INFO("parameter " << i);
      if (c.at("clipped")[i].is_null()) {
        CHECK_FALSE(params[i].grad().defined());
      } else {
        CHECK(params[i].grad().dtype() == dt);
        CHECK(compare(params[i].grad().tolist(), c.at("clipped")[i].get<std::vector<double>>(), rtol, atol) == "");
      }
    }
  }
}

TEST_CASE("clip_grad_norm: the seeds' examples", "[optim][clip][seeds]") {
  // clip_grad_norm_([x, z], 1.) with x.grad = z.grad = [1, 1]: total 2, each gradient [0.5, 0.5]
  Tensor x = param_with_grad({1, 2}, {1, 1}), z = param_with_grad({2, 3}, {1, 1});
  CHECK(optim::clip_grad_norm({x, z}, 1.0) == Approx(2.0));
  CHECK(compare(x.grad().tolist(), {0.5, 0.5}, 1e-6, 0) == "");
  CHECK(compare(z.grad().tolist(), {0.5, 0.5}, 1e-6, 0) == "");
  // one at a time: sqrt(2) each, gradients [0.7071, 0.7071]; then SGD(lr=0.001) gives x = [0.9993, 1.9993]
  x = param_with_grad({1, 2}, {1, 1});
  z = param_with_grad({2, 3}, {1, 1});
  CHECK(optim::clip_grad_norm({x}, 1.0) == Approx(std::sqrt(2.0)));
  CHECK(optim::clip_grad_norm({z}, 1.0) == Approx(std::sqrt(2.0)));
  CHECK(compare(x.grad().tolist(), {0.70710678, 0.70710678}, 1e-6, 0) == "");
  optim::SGDOptions o;
  o.lr = 0.001;
  optim::SGD opt(std::vector<Tensor>{x, z}, o);
  opt.step();
  CHECK(compare(x.tolist(), {0.99929289, 1.99929289}, 1e-6, 0) == "");
  // max_norm = 5 leaves a small gradient as it is (multiplied by clip_coef clamped to 1)
  Tensor w = param_with_grad({0, 0}, {0.3, -0.4});
  CHECK(optim::clip_grad_norm({w}, 5.0, 2.0) == Approx(0.5));
  CHECK(w.grad().tolist() == std::vector<double>{float(0.3), float(-0.4)});
}

TEST_CASE("clip_grad_norm: edge cases", "[optim][clip]") {
  // no gradients at all
  Tensor a = zeros({3}).requires_grad_(true);
  CHECK(optim::clip_grad_norm({a}, 1.0) == 0.0);
  CHECK(optim::clip_grad_norm({}, 1.0) == 0.0);
  // max norm = largest |g| of all gradients
  Tensor b = param_with_grad({0, 0, 0}, {1, -7, 2}), c = param_with_grad({0}, {3});
  CHECK(optim::clip_grad_norm({b, c}, 3.5, INFINITY) == 7.0);
  CHECK(compare(b.grad().tolist(), {0.5, -3.5, 1.0}, 1e-6, 0) == "");
  // p = 1 and p = 0 (count of nonzeros, torch.norm's p = 0)
  b = param_with_grad({0, 0, 0}, {1, -7, 0});
  CHECK(optim::clip_grad_norm({b}, 100.0, 1.0) == 8.0);
  CHECK(optim::clip_grad_norm({b}, 100.0, 0.0) == 1.0);  // norm_0 of [norm_0(g)] = [2] is 1
  // mixed dtypes: the norms are promoted, every gradient keeps its dtype
  Tensor d = zeros({2}, DType::F64).requires_grad_(true);
  d.set_grad(tensor({3.0, 0.0}, DType::F64));
  Tensor e = param_with_grad({0}, {4});
  CHECK(optim::clip_grad_norm({d, e}, 1.0) == Approx(5.0).epsilon(1e-12));
  CHECK(d.grad().dtype() == DType::F64);
  CHECK(e.grad().dtype() == DType::F32);
  CHECK(d.grad().tolist()[0] == Approx(0.6).epsilon(1e-6));
  CHECK(e.grad().tolist()[0] == Approx(0.8).epsilon(1e-6));
  // non-finite totals: an error when asked, else the gradients are scaled by it (torch)
  Tensor f = param_with_grad({0, 0}, {NAN, 1});
  CHECK_THROWS_WITH(optim::clip_grad_norm({f}, 1.0, 2.0, true),
                    Contains("non-finite") && Contains("error_if_nonfinite"));
  CHECK(f.grad().tolist()[1] == 1.0);  // untouched by the failed call
  CHECK(std::isnan(optim::clip_grad_norm({f}, 1.0)));
  CHECK(std::isnan(f.grad().tolist()[1]));
  Tensor g = param_with_grad({0}, {INFINITY});
  CHECK_THROWS_WITH(optim::clip_grad_norm({g}, 1.0, INFINITY, true), Contains("non-finite"));
}

TEST_CASE("clip_grad_value: clamps every gradient in place", "[optim][clip]") {
  Tensor a = param_with_grad({0, 0, 0, 0}, {-3, -0.5, 0.25, 9});
  Tensor b = zeros({2}).requires_grad_(true);  // no gradient: skipped
  Tensor g = a.grad();
  optim::clip_grad_value({a, b}, 1.0);
  CHECK(a.grad().tolist() == std::vector<double>{-1, -0.5, 0.25, 1});
  CHECK(g.tolist() == std::vector<double>{-1, -0.5, 0.25, 1});  // in place
  CHECK_FALSE(b.grad().defined());
}

namespace {
// Steps of `make`'s optimizer over parameters of dtype t, with gradients set by hand: contiguous
// (the fused op), or the same values as transposed views (the composite of pointwise ops).
// Parameter 2 gets no gradient on step 1, so step counts differ within the group.
std::vector<Tensor> run_steps(const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>& make,
                              DType t, bool strided_grads) {
  Generator g(7);
  std::vector<Tensor> ps;
  for (Shape s : {Shape{3, 5}, Shape{5, 3}, Shape{4, 4}, Shape{70000 / 5, 5}})  // one above a parallel grain
    ps.push_back(randn(s, t, &g).requires_grad_(true));
  auto opt = make(ps);
  for (int step = 0; step < 4; ++step) {
    for (size_t i = 0; i < ps.size(); ++i) {
      if (i == 2 && step == 1) {
        ps[i].set_grad(Tensor());
        continue;
      }
      Tensor gr = randn(ps[i].sizes(), t, &g);
      if (strided_grads) gr = gr.t().contiguous().t();  // same values, column-major
      ps[i].set_grad(gr);
    }
    opt->step();
  }
  std::vector<Tensor> out;
  for (auto& p : ps) out.push_back(p.detach().clone());
  for (auto& p : ps)
    if (const auto* st = opt->find_state(p))
      for (auto& [k, v] : *st)
        if (v.numel() > 1) out.push_back(v.clone());
  return out;
}
}  // namespace

TEST_CASE("optim: the fused SGD and Adam steps equal the composite of pointwise ops", "[optim]") {
  using Make = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
  std::vector<std::pair<std::string, Make>> cases;
  optim::SGDOptions sgd;
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  sgd.dampening = 0.1;
  sgd.weight_decay = 0.01;
  optim::SGDOptions nesterov = sgd;
  nesterov.dampening = 0;
  nesterov.nesterov = true;
  nesterov.maximize = true;
  optim::SGDOptions plain;
  plain.lr = 0.05;
  optim::AdamOptions adam;
  adam.lr = 0.01;
  adam.weight_decay = 0.1;
  optim::AdamOptions ams = adam;
  ams.amsgrad = true;
  ams.maximize = true;
  for (auto [name, o] :
       {std::pair{"sgd momentum dampening wd", sgd}, {"sgd nesterov maximize", nesterov}, {"sgd plain", plain}})
    cases.push_back({name, [o = o](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
                       return std::make_unique<optim::SGD>(std::vector<optim::ParamGroup>{{ps, {}, "g"}}, o);
                     }});
  for (auto [name, o] : {std::pair{"adam wd", adam}, {"adam amsgrad maximize", ams}}) {
    cases.push_back({std::string(name), [o = o](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
                       return std::make_unique<optim::Adam>(std::vector<optim::ParamGroup>{{ps, {}, "g"}}, o);
                     }});
    cases.push_back(
        {std::string(name) + " (adamw)", [o = o](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
           return std::make_unique<optim::AdamW>(std::vector<optim::ParamGroup>{{ps, {}, "g"}}, o);
         }});
  }
  // which path each run takes
  Tensor p = zeros({3, 5}), gc = ones({3, 5}), gs = ones({5, 3}).t();
  CHECK(fusable({{p}, {gc}}));
  CHECK_FALSE(fusable({{p}, {gs}}));
  CHECK_FALSE(fusable({{p}, {gc.to(DType::F64)}}));
  for (DType t : {DType::F64, DType::F32}) {
    for (auto& [name, make] : cases) {
      INFO(name << " " << dtype_name(t));
      auto fused = run_steps(make, t, false), composite = run_steps(make, t, true);
      REQUIRE(fused.size() == composite.size());
      // the same operations in the same order; only the compiler's fused multiply-adds may differ
      const double tol = t == DType::F64 ? 1e-14 : 1e-6;
      for (size_t i = 0; i < fused.size(); ++i) CHECK(allclose(fused[i], composite[i], tol, tol));
    }
  }
}

}  // namespace test_optim
