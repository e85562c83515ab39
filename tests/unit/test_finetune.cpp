// Starting from given weights ([model] init): a torch state_dict saved from a DDP-wrapped module
// (tests/fixtures/finetune_torch.safetensors, generators/make_finetune_fixture.py) loads through the run config
// with prefix = "module." and the model gives torch's eval logits; strict and non-strict loading,
// prefix tables, and frozen param groups (no grad, not in the optimizer).
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include "config/run_config.h"
#include "core/grad_mode.h"
#include "data/idx_dataset.h"
#include "io/safetensors.h"
#include "ops/ops.h"
#include "train/run_setup.h"
#include "train/trainer.h"
#include "unit/temp_dir.h"

namespace test_finetune {

using namespace tr;
using Catch::Matchers::Contains;

namespace {

const std::string kFixtures = TRAINER_FIXTURES_DIR;

// A run config of the export test's CNN on Fashion-MNIST with `model_extra` in [model] and `rest` after.
std::string write_config(const TempDir& tmp, const std::string& model_extra, const std::string& rest = "") {
  const std::string path = tmp / "ft.toml";
  std::ofstream(path) << "[run]\nseed = 1\nout_dir = '" << tmp.path.string() << "'\n[model]\nfile = '" << kFixtures
                      << "/export_model.toml'\n"
                      << model_extra << "\n[data]\ndataset = \"idx\"\nbatch_size = 32\n"
                      << "normalize = [0.2860, 0.3530]\n[log]\nprogress = \"none\"\n"
                      << rest;
  return path;
}

}  // namespace

TEST_CASE("[model] init: a torch state_dict gives torch's logits", "[finetune]") {
  TempDir tmp;
  std::ifstream f(kFixtures + "/finetune_logits.json");
  REQUIRE(f);
  const nlohmann::json ref = nlohmann::json::parse(f);
  train::Run run(config::load_run_config(
      write_config(tmp, "init = '" + kFixtures + "/finetune_torch.safetensors'\nprefix = \"module.\"")));
  auto ds = data::IdxDataset::fashion_mnist(false, data::IdxDataset::Normalize{0.2860f, 0.3530f});
  const int64_t n = ref.at("images").get<int64_t>();
  std::vector<Tensor> xs;
  for (int64_t i = 0; i < n; ++i) xs.push_back(ds.get(i).input.unsqueeze(0));
  run.model.net->eval();
  NoGradGuard ng;
  Tensor logits = (*run.model.net)(cat(xs, 0));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < 10; ++j) {
      INFO("image " << i << " class " << j);
      CHECK(logits.select(0, i).select(0, j).item() ==
            Approx(ref["logits"][i][j].get<double>()).epsilon(1e-5).margin(1e-6));
    }
  // the BatchNorm statistics came along (20 forward passes in torch)
  CHECK(run.model.net->get_submodule("1")->tensor("num_batches_tracked").item() == 20);
}

TEST_CASE("[model] init: strict by default, strict = false lists the keys, prefix tables, errors", "[finetune]") {
  TempDir tmp;
  const std::string init = "init = '" + kFixtures + "/finetune_torch.safetensors'\n";
  // without the prefix no key matches
  CHECK_THROWS_WITH(train::Run(config::load_run_config(write_config(tmp, init))),
                    Contains("ft.toml: [model] init") && Contains("missing key(s)") && Contains("module.0.weight") &&
                        Contains("strict = false"));
  // a table renames: only module.0.* and module.1.* match, the linear layer keeps its initial values
  const std::string partial = init + "strict = false\nprefix = { \"module.0.\" = \"0.\", \"module.1.\" = \"1.\" }\n";
  train::Run run(config::load_run_config(write_config(tmp, partial)));
  auto file = io::load_safetensors(kFixtures + "/finetune_torch.safetensors");
  auto find = [&](const std::string& k) {
    for (auto& [n, t] : file)
      if (n == k) return t;
    FAIL("no " << k);
    return Tensor();
  };
  nn::Module& net = *run.model.net;
  CHECK(equal(net.get_submodule("0")->tensor("weight"), find("module.0.weight")));
  CHECK(equal(net.get_submodule("1")->tensor("running_var"), find("module.1.running_var")));
  CHECK_FALSE(equal(net.get_submodule("6")->tensor("weight"), find("module.6.weight")));
  // resolved config names what was loaded
  CHECK_THAT(config::to_toml(run.cfg), Contains("finetune_torch.safetensors") && Contains("strict = false"));
  CHECK_THROWS_WITH(config::load_run_config(write_config(tmp, "strict = false")),
                    Contains("'strict' applies to starting weights"));
  CHECK_THROWS_WITH(config::load_run_config(write_config(tmp, init + "prefix = 3")), Contains("'prefix' must be"));
  CHECK_THROWS_WITH(train::Run(config::load_run_config(write_config(tmp, "init = 'nope.safetensors'"))),
                    Contains("nope.safetensors"));
}

TEST_CASE("frozen param groups: no grad, not in the optimizer, the rest trains", "[finetune]") {
  TempDir tmp;
  const std::string groups =
      "[optimizer]\nlr = 0.1\nmomentum = 0.9\n[[optimizer.groups]]\nname = \"features\"\nmatch = [\"0.*\", \"1.*\"]\n"
      "frozen = true\n";
  train::Run run(config::load_run_config(write_config(tmp, "", groups)));
  auto params = run.model.net->named_parameters();
  for (auto& [n, p] : params) {
    INFO(n);
    CHECK(p.requires_grad() == (n.rfind("6.", 0) == 0));
  }
  CHECK(run.optimizer->params().size() == 2);  // 6.weight, 6.bias: the default group
  CHECK_THROWS_WITH(train::Run(config::load_run_config(write_config(tmp, "", groups + "lr = 0.5\n"))),
                    Contains("a frozen group takes no hyperparameters"));
}

TEST_CASE("fine-tuning with frozen features: those weights stay bit-identical to the file's", "[finetune]") {
  TempDir tmp;
  const std::string model = "init = '" + kFixtures + "/finetune_torch.safetensors'\nprefix = \"module.\"\n";
  const std::string rest =
      "[optimizer]\nlr = 0.05\nmomentum = 0.9\n[[optimizer.groups]]\nname = \"features\"\nmodules = [\"conv2d\", "
      "\"batch_norm2d\"]\nfrozen = true\n[train]\nsteps = 12\neval_batches = 1\n[checkpoint]\nsave_final = false\n"
      "every_epoch = false\n";
  train::Trainer t(config::load_run_config(write_config(tmp, model, rest)));
  t.fit();
  auto file = io::load_safetensors(kFixtures + "/finetune_torch.safetensors");
  nn::Module& net = *t.run().model.net;
  for (auto& [n, v] : file) {
    const std::string key = n.substr(7);  // "module."
    INFO(key);
    const Tensor now = net.get_submodule(key.substr(0, 1))->tensor(key.substr(2));
    if (key == "6.weight" || key == "6.bias")
      CHECK_FALSE(equal(now, v));  // trained
    else if (key.find("running_") != std::string::npos || key.find("num_batches") != std::string::npos)
      CHECK_FALSE(equal(now, v));  // a frozen BatchNorm still tracks statistics in train mode, as torch's
    else
      CHECK(equal(now, v));  // frozen
  }
}

}  // namespace test_finetune
