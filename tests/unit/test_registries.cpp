// The registries of the kinds a config names (optimizers, schedulers, datasets, transforms,
// losses): what each holds, one unknown-name error with location, nearest and known names for all,
// the optimizer's hyperparameter descriptions, recording of resolved keys, the resume rules of
// config_diff, and how a run's loss meets a model's output.
#include <catch2/catch.hpp>
#include <algorithm>
#include "unit/error_of.h"
#include "config/config_diff.h"
#include "data/dataset_registry.h"
#include "data/synthetic_dataset.h"
#include "data/transforms.h"
#include "nn/loss.h"
#include "nn/losses/cross_entropy_loss.h"
#include "ops/ops.h"
#include "optim/adam.h"
#include "optim/optimizer_registry.h"
#include "optim/optimizer_state.h"
#include "optim/scheduler_registry.h"
#include "optim/schedulers/one_cycle_lr.h"
#include "optim/sgd.h"
#include "train/run_loss.h"
#include "unit/temp_dir.h"

namespace test_registries {

using namespace tr;
using Catch::Matchers::Contains;
using tr::test::error_of;
using V = std::vector<std::string>;

namespace {

toml::table parse(const std::string& text) { return toml::parse(std::string_view(text), std::string_view("cfg.toml")); }

// The registry's names joined as its error lists them, "a, b, c": an entry added later is in it too.
template <typename T> std::string known_names() {
  std::string r;
  for (const auto& n : Registry<T>::get().names()) r += (r.empty() ? "" : ", ") + n;
  return r;
}

// Every name of `want` is registered (a registry may hold more: adding a plugin touches no test).
template <typename T> bool registers(const V& want) {
  const V have = Registry<T>::get().names();
  for (const auto& n : want)
    if (std::find(have.begin(), have.end(), n) == have.end()) return false;
  return true;
}

template <typename T> std::string unknown_error(const std::string& text, const std::string& key) {
  toml::table t = parse(text);
  TomlTable tt(t, "cfg.toml", "[section]");
  try {
    tt.get_registered<T>(key);
  } catch (const Error& e) { return e.what(); }
  return "no error";
}

}  // namespace

TEST_CASE("registries: every kind holds its entries, each with a builder and a doc line", "[registry]") {
  CHECK(registers<optim::OptimizerType>({"adam", "adamw", "sgd"}));
  CHECK(registers<optim::SchedulerType>(
      {"constant", "cosine", "exponential", "lambda", "linear", "multistep", "onecycle", "sequential", "step"}));
  CHECK(registers<data::DatasetType>({"csv", "idx", "image_folder", "recordio", "synthetic", "text", "tokens"}));
  CHECK(registers<data::TransformType>({"random_crop", "random_horizontal_flip"}));
  CHECK(registers<nn::LossType>({"bce_with_logits", "cross_entropy", "mse"}));
  CHECK_FALSE(registers<nn::LossType>({"mse", "hinge_embedding"}));
  for (auto& [n, e] : Registry<optim::OptimizerType>::get().all()) {
    INFO(n);
    CHECK(e.build);
    CHECK(!e.doc().empty());
    CHECK(!e.class_name.empty());
  }
  for (auto& [n, e] : Registry<optim::SchedulerType>::get().all()) CHECK((e.build && !e.doc.empty()));
  for (auto& [n, e] : Registry<data::DatasetType>::get().all()) CHECK((e.build && !e.doc.empty()));
  for (auto& [n, e] : Registry<data::TransformType>::get().all()) CHECK((e.build && !e.doc.empty()));
  for (auto& [n, e] : Registry<nn::LossType>::get().all()) CHECK((e.build && !e.doc.empty()));
  CHECK(Registry<nn::LossType>::get().at("cross_entropy").classification);
  CHECK_FALSE(Registry<nn::LossType>::get().at("mse").classification);
  CHECK(Registry<optim::SchedulerType>::get().at("onecycle").default_interval == "step");
  CHECK(Registry<optim::SchedulerType>::get().at("cosine").default_interval == "epoch");
}

TEST_CASE("registries: an unknown name is one error with its location, the nearest and the known names", "[registry]") {
  CHECK_THAT(unknown_error<optim::OptimizerType>("lr = 1\ntype = \"adamm\"\n", "type"),
             Contains("cfg.toml:2:8") && Contains("unknown optimizer 'adamm'; did you mean 'adam'?") &&
                 Contains("(known: " + known_names<optim::OptimizerType>() + ")"));
  CHECK_THAT(unknown_error<optim::SchedulerType>("x = 1\ntype = \"cosin\"\n", "type"),
             Contains("cfg.toml:2:") && Contains("unknown scheduler 'cosin'; did you mean 'cosine'?"));
  CHECK_THAT(unknown_error<data::DatasetType>("dataset = \"idxx\"\n", "dataset"),
             Contains("cfg.toml:1:") && Contains("unknown dataset 'idxx'; did you mean 'idx'?") &&
                 Contains("(known: " + known_names<data::DatasetType>() + ")"));
  CHECK_THAT(unknown_error<data::TransformType>("type = \"random_cropp\"\n", "type"),
             Contains("unknown transform 'random_cropp'; did you mean 'random_crop'?"));
  CHECK_THAT(unknown_error<nn::LossType>("type = \"cross_entopy\"\n", "type"),
             Contains("unknown loss 'cross_entopy'; did you mean 'cross_entropy'?") &&
                 Contains("(known: " + known_names<nn::LossType>() + ")"));
  // nothing near: no guess, still the list
  CHECK_THAT(unknown_error<nn::LossType>("type = \"hinge_embedding\"\n", "type"),
             !Contains("did you mean") && Contains("known: bce_with_logits"));
  // a default name is looked up the same way
  toml::table empty;
  CHECK(&TomlTable(empty, "cfg.toml", "[loss]").get_registered<nn::LossType>("type", "mse") ==
        &Registry<nn::LossType>::get().at("mse"));
}

TEST_CASE("optimizer registry: defaults, TOML forms and ranges come from the registration", "[registry][optim]") {
  auto read = [](const std::string& type, const std::string& text) {
    toml::table t = parse(text);
    TomlTable tt(t, "cfg.toml", "[optimizer]");
    return optim::read_hyperparameters(tt, type, true);
  };
  CHECK(read("sgd", "") == optim::Options{{"lr", 0.01},
                                          {"momentum", 0.0},
                                          {"dampening", 0.0},
                                          {"weight_decay", 0.0},
                                          {"nesterov", 0.0},
                                          {"maximize", 0.0}});
  CHECK(read("adam", "").at("lr") == 1e-3);
  CHECK(read("adam", "").at("weight_decay") == 0.0);
  CHECK(read("adamw", "").at("weight_decay") == 0.01);
  optim::Options o = read("adamw", "betas = [0.5, 0.75]\namsgrad = true\nlr = 1\n");
  CHECK(o.at("beta1") == 0.5);
  CHECK(o.at("beta2") == 0.75);
  CHECK(o.at("amsgrad") == 1.0);
  CHECK(o.at("lr") == 1.0);
  CHECK_THAT(error_of([&] { read("sgd", "betas = [0.9, 0.99]\n"); }),
             Contains("cfg.toml:1:") && Contains("'betas' is not a hyperparameter of sgd") && Contains("momentum"));
  CHECK_THAT(error_of([&] { read("adam", "momentum = 0.9\n"); }),
             Contains("'momentum' is not a hyperparameter of adam"));
  CHECK_THAT(error_of([&] { read("adam", "betas = [0.9, 1.0]\n"); }), Contains("beta2 must be in [0, 1), got 1"));
  CHECK_THAT(error_of([&] { read("adam", "betas = [0.9]\n"); }), Contains("list of two numbers [beta1, beta2]"));
  CHECK_THAT(error_of([&] { read("sgd", "lr = -0.1\n"); }), Contains("'lr' must be >= 0, got -0.1"));
  CHECK_THAT(error_of([&] { read("sgd", "nesterov = 1\n"); }), Contains("'nesterov' must be a boolean"));
  CHECK(Registry<optim::OptimizerType>::get().at("adam").doc() ==
        "lr = 0.001, betas = [0.9, 0.999], eps = 1e-08, weight_decay = 0, amsgrad = false, maximize = false");
  // the builder makes the class the registration names, with the hyperparameters as defaults
  Tensor p = zeros({2});
  p.requires_grad_(true);
  for (auto& [name, type] : Registry<optim::OptimizerType>::get().all()) {
    INFO(name);
    auto opt = type.build({{{p}, {}, "default"}}, read(name, ""));
    CHECK(opt->type_name() == type.class_name);
    CHECK(optim::optimizer_type_of(*opt) == &type);
    CHECK(opt->defaults() == read(name, ""));
  }
}

TEST_CASE("optimizer registry: state_dict's form and OneCycleLR's momentum follow the registration",
          "[registry][optim]") {
  Tensor p = zeros({2});
  p.requires_grad_(true);
  optim::AdamOptions ao;
  ao.amsgrad = true;
  optim::AdamW adamw({{{p}, {}, "default"}}, ao);
  nlohmann::json g = optim::state_dict(adamw).param_groups[0];
  CHECK(g.at("betas") == nlohmann::json{0.9, 0.999});
  CHECK(!g.contains("beta1"));
  CHECK(g.at("amsgrad") == true);
  CHECK(g.at("capturable") == false);    // AdamW's torch constants ...
  CHECK(!g.contains("differentiable"));  // ... not Adam's
  optim::OneCycleOptions oc;
  oc.max_lr = {1.0};
  oc.total_steps = 10;
  optim::OneCycleLR s(adamw, oc);
  CHECK(adamw.param_groups()[0].options.at("beta1") == Approx(0.95));  // Adam's momentum_key
  CHECK(s.state_dict().at("use_beta1") == true);
  optim::SGD sgd(std::vector<Tensor>{p}, optim::SGDOptions{});
  optim::OneCycleLR s2(sgd, oc);
  CHECK(sgd.param_groups()[0].options.at("momentum") == Approx(0.95));
  CHECK(s2.state_dict().at("use_beta1") == false);
}

TEST_CASE("TomlTable records what its getters return, defaults included", "[registry][toml]") {
  toml::table t = parse("a = 1\nlist = [{x = 2}, {}]\n[sub]\ny = true\n");
  toml::table out;
  TomlTable tt(t, "cfg.toml", "[t]");
  tt.record_into(out);
  CHECK(tt.get_int("a", 5) == 1);
  CHECK(tt.get_float("b", 0.5) == 0.5);
  CHECK(tt.get_string("c", "d") == "d");
  CHECK(tt.get_floats("e", {1.0, 2.0}) == std::vector<double>{1.0, 2.0});
  for (const TomlTable& e : tt.get_tables("list")) e.get_int("x", 7);
  tt.get_table("sub")->get_bool("y", false);
  tt.record("c", "resolved");
  std::ostringstream os;
  os << out;
  CHECK(out["a"].value<int64_t>() == 1);
  CHECK(out["b"].value<double>() == 0.5);
  CHECK(out["c"].value<std::string>() == "resolved");
  CHECK(out["e"].as_array()->size() == 2);
  CHECK(out["list"][0]["x"].value<int64_t>() == 2);
  CHECK(out["list"][1]["x"].value<int64_t>() == 7);
  CHECK(out["sub"]["y"].value<bool>() == true);
  // without record_into nothing is written anywhere
  TomlTable quiet(t, "cfg.toml", "[t]");
  CHECK(quiet.get_int("z", 3) == 3);
  CHECK(!out.contains("z"));
}

TEST_CASE("loss registry: builders read their keys, a run's loss meets the model's output", "[registry][losses]") {
  toml::table t = parse("label_smoothing = 0.1\nignore_index = 2\n");
  toml::table out;
  TomlTable tt(t, "cfg.toml", "[loss]");
  tt.record_into(out);
  nn::LossPtr l = Registry<nn::LossType>::get().at("cross_entropy").build(tt);
  auto* ce = dynamic_cast<nn::CrossEntropyLoss*>(l.get());
  REQUIRE(ce);
  CHECK(ce->label_smoothing == 0.1);
  CHECK(ce->ignore_index == 2);
  CHECK(out["label_smoothing"].value<double>() == 0.1);
  toml::table bad = parse("label_smoothing = 1.5\n");
  CHECK_THAT(
      error_of([&] { Registry<nn::LossType>::get().at("cross_entropy").build(TomlTable(bad, "cfg.toml", "[loss]")); }),
      Contains("cfg.toml:1:") && Contains("'label_smoothing' must be in [0, 1], got 1.5"));

  // classification: [B, T, V] logits against [B, T] targets, scored per token
  toml::table empty;
  train::RunLoss ce_loss(Registry<nn::LossType>::get().at("cross_entropy").build(TomlTable(empty, "", "")), true);
  Tensor logits = tensor({2.0, 0.0, 0.0, 1.0, 3.0, 0.0, 0.0, 0.0, 1.0, 5.0, 0.0, 0.0}).reshape({2, 2, 3});
  Tensor target = tensor({0, 1, 2, 1}, DType::I64).reshape({2, 2});
  auto [loss, correct] = ce_loss(logits, target);
  CHECK(loss.item() == Approx(cross_entropy(logits.reshape({4, 3}), target.reshape({4})).item()));
  CHECK(correct.item() == 3);  // argmax: 0, 1, 2, 0
  // a regression loss: targets cast to the output's dtype, an output [B, 1] meets targets [B]
  train::RunLoss mse(Registry<nn::LossType>::get().at("mse").build(TomlTable(empty, "", "")), false);
  auto [m, none] = mse(tensor({1.0f, 2.0f}).reshape({2, 1}), tensor({0, 4}, DType::I64));
  CHECK(m.item() == Approx((1.0 + 4.0) / 2));
  CHECK(!none.defined());
}

TEST_CASE("dataset and transform registries: builders get the model's shape and read their keys", "[registry][data]") {
  toml::table t = parse("num_classes = 4\ntrain_size = 20\n");
  toml::table out;
  TomlTable tt(t, "cfg.toml", "[data]");
  tt.record_into(out);
  data::DatasetContext ctx;
  ctx.seed = 7;
  ctx.input_shape = {1, 4, 4};
  data::DatasetSplits s = Registry<data::DatasetType>::get().at("synthetic").build(tt, ctx);
  CHECK(s.train->size() == 20);
  CHECK(s.eval->size() == 1024);
  CHECK(s.train->get(0).input.sizes() == Shape{1, 4, 4});
  CHECK(out["eval_size"].value<int64_t>() == 1024);  // defaults recorded
  tt.finish();
  // text: the model's input must be [block_size]
  toml::table text = parse("block_size = 16\n");
  ctx.input_shape = {32};
  CHECK_THAT(error_of([&] {
               Registry<data::DatasetType>::get().at("text").build(TomlTable(text, "cfg.toml", "[data]"), ctx);
             }),
             Contains("cfg.toml:1:") && Contains("'block_size' is 16, but the model expects per-sample input [32]"));

  // transforms: in order, each registered; image transforms refuse other samples (after unknown keys)
  toml::table d =
      parse("transforms = [{type = \"random_crop\", padding = 1}, {type = \"random_horizontal_flip\", p = 1.0}]\n");
  TomlTable dt(d, "cfg.toml", "[data]");
  auto ts = data::build_transforms(dt, {{1, 4, 4}, "synthetic", 0.5, 0.25});
  REQUIRE(ts.size() == 2);
  CHECK(ts[0]->describe() == "RandomCrop(size=(4, 4), padding=1, fill=-2)");  // fill 0 normalised: (0 - 0.5) / 0.25
  CHECK(ts[1]->describe() == "RandomHorizontalFlip(p=1)");
  CHECK_THAT(
      error_of([&] {
        data::build_transforms(dt, {{8}, "synthetic"});
      }),
      Contains("[data] transforms: random_crop needs image samples [C, H, W], but the synthetic data gives [8]"));
  toml::table typo = parse("transforms = [{type = \"random_crop\", paddin = 1}]\n");
  CHECK_THAT(error_of([&] {
               data::build_transforms(TomlTable(typo, "cfg.toml", "[data]"), {{8}, "synthetic"});
             }),
             Contains("unknown key 'paddin'") && Contains("did you mean 'padding'"));
  toml::table none = parse("transforms = [{p = 0.5}]\n");
  CHECK_THAT(error_of([&] {
               data::build_transforms(TomlTable(none, "cfg.toml", "[data]"), {{1, 4, 4}, "x"});
             }),
             Contains("missing required key 'type'"));
}

TEST_CASE("config_diff: keys an earlier version wrote or lacked do not block a resume", "[registry][config]") {
  toml::table saved = parse("[optimizer]\ntype = 'sgd'\nlr = 0.1\nbetas = [0.9, 0.999]\n[train]\nsteps = 3\n");
  toml::table now = parse(
      "[optimizer]\ntype = 'sgd'\nlr = 0.1\n[loss]\ntype = 'cross_entropy'\nlabel_smoothing = 0.0\n"
      "[train]\nsteps = 3\n");
  toml::table source = parse("[optimizer]\nlr = 0.1\n");
  CHECK(config::diff_configs(saved, now, &source).empty());
  // without the source every difference counts (the strict comparison)
  CHECK(config::diff_configs(saved, now).size() == 3);
  // a key the config sets is a change, even if the earlier version lacked it
  toml::table set_ls = parse("[loss]\nlabel_smoothing = 0.0\n");
  auto c = config::diff_configs(saved, now, &set_ls);
  REQUIRE(c.size() == 1);
  CHECK(c[0].key == "loss.label_smoothing");
  CHECK(c[0].before == "(absent)");
  CHECK_FALSE(c[0].harmless);
  // an [optimizer] key the type does read, or any key after a change of type, still counts
  toml::table saved_m = parse("[optimizer]\ntype = 'sgd'\nlr = 0.1\nmomentum = 0.9\n[train]\nsteps = 3\n");
  c = config::diff_configs(saved_m, now, &source);
  REQUIRE(c.size() == 1);
  CHECK(c[0].str() == "optimizer.momentum: 0.9 -> (absent)");
  toml::table now_adam = parse("[optimizer]\ntype = 'adam'\nlr = 0.1\n[train]\nsteps = 3\n");
  c = config::diff_configs(saved, now_adam, &source);
  CHECK(c.size() == 2);  // betas and type
}

}  // namespace test_registries
