// Tied parameters (a layer's `tie`), [[init]] rules of model files, the parameter selector they share
// with [[optimizer.groups]], position_embedding, repeat's `layer`, and the GPT-2 model files: their
// parameter counts, nanoGPT's state_dict names and GPT-2's initialisation.
#include <catch2/catch.hpp>
#include "unit/error_of.h"
#include <cmath>
#include <map>
#include <toml++/toml.h>
#include "autograd/gradcheck.h"
#include "core/grad_mode.h"
#include "core/rng.h"
#include "nn/init_rules.h"
#include "nn/layer_registry.h"
#include "nn/layers/position_embedding.h"
#include "nn/model_file.h"
#include "ops/ops.h"
#include "optim/param_groups.h"

namespace test_tied_init {

using namespace tr;
using Catch::Matchers::Contains;
using tr::test::error_of;

namespace {

const std::string kModels = std::string(TRAINER_FIXTURES_DIR) + "/../../models/";

nn::Model model_from(const std::string& src) {
  toml::table t = toml::parse(src, std::string_view("m.toml"));
  return nn::build_model(TomlTable(t, "m.toml", "model"));
}

// A GPT-2-shaped model: nanoGPT's names, lm_head tied to wte unless `tie` is false.
std::string tiny_gpt(bool tie = true, const std::string& extra = "", int64_t layers = 1) {
  return str(R"(
input = [6]
input_dtype = "int64"
[[layers]]
type = "sequential"
name = "transformer"
layers = [
  { type = "embedding", name = "wte", num_embeddings = 11, embedding_dim = 8 },
  { type = "position_embedding", name = "wpe", block_size = 6 },
  { type = "repeat", name = "h", times = )",
             layers, R"(, layer = { type = "transformer_block", n_head = 2, gelu = "tanh" } },
  { type = "layer_norm", name = "ln_f" },
]
[[layers]]
type = "linear"
name = "lm_head"
out_features = 11
bias = false
)",
             tie ? "tie = { weight = \"transformer.wte.weight\" }\n" : "", extra);
}

std::vector<std::string> keys(const nn::StateDict& sd) {
  std::vector<std::string> k;
  for (auto& [n, t] : sd) k.push_back(n);
  return k;
}

double sample_std(const Tensor& t) { return t.to(DType::F64).std().item(); }

}  // namespace

TEST_CASE("tie: one tensor under two names: counted, listed and loaded once, both names in the state_dict", "[tie]") {
  manual_seed(0);
  nn::Model m = model_from(tiny_gpt());
  nn::Module& net = *m.net;
  const Tensor& wte = net.get_submodule("transformer.wte")->tensor("weight");
  CHECK(net.get_submodule("lm_head")->tensor("weight").is_same(wte));
  CHECK(net.tied_parameters() ==
        std::vector<std::pair<std::string, std::string>>{{"lm_head.weight", "transformer.wte.weight"}});

  // parameters() and named_parameters() list it once, under its first name (torch's)
  int64_t unique = 0;
  for (auto& p : net.parameters()) unique += p.numel();
  nn::Model untied = model_from(tiny_gpt(false));
  CHECK(unique == untied.net->num_parameters() - 11 * 8);
  CHECK(net.num_parameters() == unique);
  auto np = keys(net.named_parameters());
  CHECK(std::count(np.begin(), np.end(), "transformer.wte.weight") == 1);
  CHECK(std::count(np.begin(), np.end(), "lm_head.weight") == 0);

  // the state_dict has both names, as torch's (nanoGPT's order)
  nn::StateDict sd = net.state_dict();
  const std::vector<std::string> want = {"transformer.wte.weight",
                                         "transformer.wpe.weight",
                                         "transformer.h.0.ln_1.weight",
                                         "transformer.h.0.ln_1.bias",
                                         "transformer.h.0.attn.c_attn.weight",
                                         "transformer.h.0.attn.c_attn.bias",
                                         "transformer.h.0.attn.c_proj.weight",
                                         "transformer.h.0.attn.c_proj.bias",
                                         "transformer.h.0.ln_2.weight",
                                         "transformer.h.0.ln_2.bias",
                                         "transformer.h.0.mlp.c_fc.weight",
                                         "transformer.h.0.mlp.c_fc.bias",
                                         "transformer.h.0.mlp.c_proj.weight",
                                         "transformer.h.0.mlp.c_proj.bias",
                                         "transformer.ln_f.weight",
                                         "transformer.ln_f.bias",
                                         "lm_head.weight"};
  CHECK(keys(sd) == want);
  CHECK(nn::same_tensor_data(sd.front().second, sd.back().second));
  nn::StateDict once = nn::without_aliases(sd);
  CHECK(keys(once) == std::vector<std::string>(want.begin(), want.end() - 1));

  // a file with the tensor under one name (either) loads strictly; one without it lists both names
  manual_seed(1);
  nn::Model other = model_from(tiny_gpt());
  CHECK_NOTHROW(other.net->load_state_dict(once));
  CHECK(allclose(other.net->get_submodule("lm_head")->tensor("weight"), wte, 0, 0));
  nn::StateDict only_head;
  for (auto& [n, t] : sd)
    if (n != "transformer.wte.weight") only_head.emplace_back(n, t);
  CHECK_NOTHROW(other.net->load_state_dict(only_head));
  nn::StateDict neither(once.begin() + 1, once.end());
  nn::LoadResult r = other.net->load_state_dict(neither, false);
  CHECK(r.missing_keys == std::vector<std::string>{"transformer.wte.weight", "lm_head.weight"});

  // the summary counts it once and says where it is tied
  const std::string s = nn::model_summary(m);
  std::string digits = std::to_string(unique), with_commas;
  for (size_t i = 0; i < digits.size(); ++i)
    with_commas += (i && (digits.size() - i) % 3 == 0 ? "," : "") + digits.substr(i, 1);
  CHECK_THAT(s, Contains("total parameters: " + with_commas + " "));
  CHECK_THAT(s, Contains("tied: weight = transformer.wte.weight"));

  // moving or casting the model keeps the tie
  net.to(DType::F64);
  CHECK(net.get_submodule("lm_head")->tensor("weight").is_same(net.get_submodule("transformer.wte")->tensor("weight")));
  CHECK(net.get_submodule("lm_head")->tensor("weight").dtype() == DType::F64);
}

TEST_CASE("tie: the tied weight's gradient is the sum of its two uses", "[tie]") {
  manual_seed(5);
  nn::Model tied = model_from(tiny_gpt());
  manual_seed(5);
  nn::Model untied = model_from(tiny_gpt(false));
  tied.net->to(DType::F64);
  untied.net->to(DType::F64);
  untied.net->load_state_dict(tied.net->state_dict());  // lm_head gets wte's values
  Generator g(9);
  Tensor ids = randint(0, 11, {3, 6}, DType::I64, &g), target = randint(0, 11, {3, 6}, DType::I64, &g);
  auto loss = [&](nn::Module& net) { return cross_entropy(net(ids).reshape({18, 11}), target.reshape({18})); };
  loss(*tied.net).backward();
  loss(*untied.net).backward();
  const Tensor gt = tied.net->get_submodule("transformer.wte")->tensor("weight").grad();
  const Tensor ge = untied.net->get_submodule("transformer.wte")->tensor("weight").grad();
  const Tensor gh = untied.net->get_submodule("lm_head")->tensor("weight").grad();
  REQUIRE(gt.defined());
  CHECK(allclose(gt, ge + gh, 1e-12, 1e-14));
  // and it equals a finite difference of the loss in one element of the shared tensor
  Tensor w = tied.net->get_submodule("transformer.wte")->tensor("weight");
  const double eps = 1e-6;
  NoGradGuard ng;
  for (int64_t idx : {int64_t(0), int64_t(37), int64_t(80)}) {
    Tensor flat = w.detach().view({-1});
    const double v = flat[idx].item();
    flat[idx].fill_(v + eps);
    const double up = loss(*tied.net).item();
    flat[idx].fill_(v - eps);
    const double down = loss(*tied.net).item();
    flat[idx].fill_(v);
    CHECK(gt.view({-1})[idx].item() == Approx((up - down) / (2 * eps)).epsilon(1e-6).margin(1e-9));
  }
}

TEST_CASE("tie: errors name the layer, the names and the shapes", "[tie]") {
  CHECK_THAT(error_of([] { model_from(tiny_gpt(false, "tie = { weight = \"transformer.wte.weigth\" }\n")); }),
             Contains("layer 1 (linear)") && Contains("no parameter 'transformer.wte.weigth'") &&
                 Contains("did you mean 'transformer.wte.weight'"));
  CHECK_THAT(error_of([] { model_from(tiny_gpt(false, "tie = { weight = \"transformer.wpe.weight\" }\n")); }),
             Contains("cannot tie parameter 'weight' of shape [11, 8]") && Contains("shape [6, 8]"));
  CHECK_THAT(error_of([] { model_from(tiny_gpt(false, "tie = { bias = \"transformer.ln_f.bias\" }\n")); }),
             Contains("names no parameter of this layer (its parameters: weight)"));
  CHECK_THAT(error_of([] { model_from(tiny_gpt(false, "tie = { weight = \"lm_head.weight\" }\n")); }),
             Contains("already one tensor"));
  toml::table t = toml::parse(std::string_view("type = 'linear'\nout_features = 3\ntie = { weight = 'x.weight' }"));
  nn::ShapeInfo io{{4}};
  CHECK_THAT(error_of([&] { nn::build_layer(TomlTable(t, "l.toml", "layer 0"), io); }), Contains("needs a model"));
  // a tie inside a block: attn.c_proj's weight tied to mlp.c_proj's is the wrong shape
  CHECK_THAT(error_of([] {
               model_from(R"(
input = [4, 8]
[[layers]]
type = "transformer_block"
n_head = 2
tie = { "attn.c_proj.weight" = "0.mlp.c_fc.weight" }
)");
             }),
             Contains("cannot tie parameter 'weight' of shape [8, 8]"));
}

TEST_CASE("tie: a param group or a frozen group that names either name takes the one tensor", "[tie]") {
  nn::Model m = model_from(tiny_gpt());
  optim::GroupRule head{"head", {{"lm_head.*"}, {}, {}}, {{"lr", 0.5}}};
  auto groups = optim::build_param_groups(*m.net, {head});
  REQUIRE(groups.size() == 2);
  REQUIRE(groups[1].params.size() == 1);
  CHECK(groups[1].params[0].is_same(m.net->get_submodule("transformer.wte")->tensor("weight")));
  // modules = ["linear"], param_names = ["weight"] takes it too (lm_head is a Linear)
  optim::GroupRule lin{"lin", {{}, {"linear"}, {"weight"}}, {}};
  groups = optim::build_param_groups(*m.net, {lin});
  CHECK(std::any_of(groups[1].params.begin(), groups[1].params.end(), [&](const Tensor& t) {
    return t.is_same(m.net->get_submodule("transformer.wte")->tensor("weight"));
  }));
  optim::GroupRule frozen{"frozen", {{"lm_head.weight"}, {}, {}}, {}};
  frozen.frozen = true;
  CHECK(optim::freeze_parameters(*m.net, {frozen}) == 1);
  CHECK_FALSE(m.net->get_submodule("transformer.wte")->tensor("weight").requires_grad());
}

TEST_CASE("selector: min_dim / max_dim split nanoGPT's decay groups", "[tie][init]") {
  nn::Model m = model_from(tiny_gpt(true, "", 2));
  optim::GroupRule no_decay{"no_decay", {{}, {}, {}, std::nullopt, 1}, {{"weight_decay", 0.0}}};
  auto groups = optim::build_param_groups(*m.net, {no_decay});
  for (auto& p : groups[0].params) CHECK(p.dim() >= 2);
  for (auto& p : groups[1].params) CHECK(p.dim() == 1);
  // 2-D: wte (= lm_head), wpe, and 4 per block; 1-D: ln_f's two and 8 per block
  CHECK(groups[0].params.size() == 2 + 4 * 2);
  CHECK(groups[1].params.size() == 2 + 8 * 2);
}

TEST_CASE("init: [[init]] rules draw torch.nn.init's distributions, later rules win", "[init]") {
  manual_seed(0);
  nn::Model m = model_from(R"(
input = [256]
[[layers]]
type = "linear"
out_features = 512
init = [{ param_names = ["weight"], type = "normal", std = 0.02 }, { param_names = ["bias"], type = "constant", value = 0.25 }]
[[layers]]
type = "linear"
out_features = 256
[[layers]]
type = "linear"
out_features = 128
[[init]]
match = ["1.*"]
type = "uniform"
a = -0.5
b = 0.125
[[init]]
match = ["2.weight"]
type = "kaiming_normal"
nonlinearity = "relu"
[[init]]
match = ["2.weight"]
type = "xavier_uniform"
gain = 2.0
)");
  auto w = [&](const std::string& n) { return m.net->get_submodule(n.substr(0, 1))->tensor(n.substr(2)); };
  CHECK(sample_std(w("0.weight")) == Approx(0.02).epsilon(0.02));
  CHECK(w("0.weight").mean().item() == Approx(0.0).margin(0.001));
  CHECK(w("0.bias").min().item() == 0.25);
  CHECK(w("0.bias").max().item() == 0.25);
  for (const char* n : {"1.weight", "1.bias"}) {
    CHECK(w(n).min().item() >= -0.5);
    CHECK(w(n).max().item() < 0.125);
    CHECK(w(n).min().item() < -0.45);
  }
  // the later xavier_uniform rule wins: U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out))
  const double bound = 2.0 * std::sqrt(6.0 / (256 + 128));
  CHECK(w("2.weight").max().item() <= bound);
  CHECK(w("2.weight").max().item() > 0.95 * bound);
  CHECK(sample_std(w("2.weight")) == Approx(bound / std::sqrt(3.0)).epsilon(0.03));
  // kaiming_normal alone: std = sqrt(2) / sqrt(fan_in)
  manual_seed(0);
  nn::Model k = model_from(
      "input = [400]\n[[layers]]\ntype = 'linear'\nout_features = 300\n"
      "[[init]]\nparam_names = ['weight']\ntype = 'kaiming_normal'\nnonlinearity = 'relu'\n");
  CHECK(sample_std(k.net->get_submodule("0")->tensor("weight")) == Approx(std::sqrt(2.0 / 400)).epsilon(0.02));
}

TEST_CASE("init: the parameters no rule selects keep the layers' default draws", "[init]") {
  const std::string base =
      "input = [16]\n[[layers]]\ntype = 'linear'\nout_features = 8\n[[layers]]\ntype = 'linear'\n"
      "out_features = 4\n";
  manual_seed(4);
  nn::Model plain = model_from(base);
  manual_seed(4);
  nn::Model ruled = model_from(base + "[[init]]\nmatch = ['1.bias']\ntype = 'zeros'\n");
  auto sd0 = plain.net->state_dict(), sd1 = ruled.net->state_dict();
  for (size_t i = 0; i < sd0.size(); ++i) {
    INFO(sd0[i].first);
    if (sd0[i].first == "1.bias")
      CHECK(sd1[i].second.abs().max().item() == 0.0);
    else
      CHECK(allclose(sd0[i].second, sd1[i].second, 0, 0));
  }
}

TEST_CASE("init: errors name the rule, the key and what was expected", "[init]") {
  const std::string lin = "input = [4]\n[[layers]]\ntype = 'linear'\nout_features = 3\n";
  CHECK_THAT(error_of([&] { model_from(lin + "[[init]]\ntype = 'normall'\n"); }),
             Contains("m.toml:6") && Contains("normall") && Contains("normal"));
  CHECK_THAT(error_of([&] { model_from(lin + "[[init]]\ntype = 'uniform'\nstd = 0.1\n"); }),
             Contains("unknown key 'std'"));
  CHECK_THAT(error_of([&] { model_from(lin + "[[init]]\nmatch = ['*.gamma']\ntype = 'ones'\n"); }),
             Contains("model.init[0]") && Contains("selects no parameter"));
  CHECK_THAT(error_of([&] { model_from(lin + "[[init]]\nparam_names = ['bias']\ntype = 'kaiming_uniform'\n"); }),
             Contains("kaiming_uniform needs a tensor of at least 2 dims"));
  CHECK_THAT(error_of([&] { model_from(lin + "[[init]]\nmodules = ['lineer']\ntype = 'zeros'\n"); }),
             Contains("unknown module kind 'lineer'") && Contains("did you mean 'linear'"));
  CHECK_THAT(error_of([&] { model_from(lin + "[[init]]\ntype = 'normal'\nresidual_scaling = true\n"); }),
             Contains("no transformer_block layers"));
  CHECK_THAT(error_of([] {
               model_from(
                   "input = [4]\n[[layers]]\ntype = 'linear'\nout_features = 3\n"
                   "init = [{ type = 'normal', residual_scaling = true }]\n");
             }),
             Contains("residual_scaling") && Contains("model's [[init]]"));
  CHECK_THAT(
      error_of([] { model_from("input = [4]\n[[init]]\ntype = 'zeros'\nmin_dim = -1\n[[layers]]\ntype = 'relu'\n"); }),
      Contains("min_dim") && Contains("at least 0"));
}

TEST_CASE("position_embedding: x + weight[0 : T], its gradient, and its limits", "[layers][init]") {
  manual_seed(2);
  nn::PositionEmbedding pe(5, 3);
  pe.to(DType::F64);
  Generator g(1);
  Tensor x = randn({2, 4, 3}, TensorOptions(DType::F64), &g);
  Tensor y = pe(x);
  CHECK(allclose(y, x + pe.weight.narrow(0, 0, 4), 0, 0));
  Tensor longer = randn({2, 6, 3}, TensorOptions(DType::F64), &g);
  CHECK_THAT(error_of([&] { pe(longer); }), Contains("positions 0..5") && Contains("block_size = 5"));
  // the weight is an input of the function: the layer's parameter is tied to it on every call
  auto r = gradcheck(
      [&](const std::vector<Tensor>& in) {
        pe.tie_parameter("weight", in[1]);
        return std::vector<Tensor>{pe(in[0])};
      },
      {x.detach().requires_grad_(true), pe.weight.detach().clone().requires_grad_(true)});
  INFO(r.message);
  CHECK(r.ok);
  CHECK_THAT(error_of([] { model_from("input = [7, 3]\n[[layers]]\ntype = 'position_embedding'\nblock_size = 6\n"); }),
             Contains("T = 7") && Contains("exceeds block_size = 6"));
}

TEST_CASE("repeat: layer = {...} makes each copy the layer itself (nanoGPT's h.0.ln_1 names)", "[layers]") {
  nn::Model m = model_from(tiny_gpt(true, "", 2));
  CHECK_NOTHROW(m.net->get_submodule("transformer.h.1.ln_1"));
  CHECK_THAT(error_of([] {
               model_from(
                   "input = [4]\n[[layers]]\ntype = 'repeat'\ntimes = 2\nlayer = { type = 'relu' }\n"
                   "layers = [{ type = 'relu' }]\n");
             }),
             Contains("give one"));
}

TEST_CASE("GPT-2 model files: OpenAI's parameter counts, nanoGPT's names, GPT-2's initialisation",
          "[init][gpt2][large]") {
  // (gpt2_124m_padded: 124,475,904 and gpt2_350m: 354,823,168 are the same layout at other sizes;
  // `trainer summary` prints them, and building them here would cost 20 s of drawing weights)
  const std::map<std::string, int64_t> counts = {{"gpt2_124m.toml", 124439808}, {"gpt2_d4.toml", 16090880}};
  for (auto& [file, n] : counts) {
    INFO(file);
    manual_seed(0);
    nn::Model m = nn::load_model_file(kModels + file);
    CHECK(m.net->num_parameters() == n);
    CHECK(m.net->tied_parameters() ==
          std::vector<std::pair<std::string, std::string>>{{"lm_head.weight", "transformer.wte.weight"}});
    if (file != "gpt2_d4.toml") continue;
    auto p = [&](const std::string& path, const std::string& name) { return m.net->get_submodule(path)->tensor(name); };
    CHECK(sample_std(p("transformer.wte", "weight")) == Approx(0.02).epsilon(0.01));
    CHECK(sample_std(p("transformer.wpe", "weight")) == Approx(0.02).epsilon(0.02));
    CHECK(sample_std(p("transformer.h.0.attn.c_attn", "weight")) == Approx(0.02).epsilon(0.02));
    CHECK(sample_std(p("transformer.h.0.mlp.c_fc", "weight")) == Approx(0.02).epsilon(0.02));
    for (const char* proj : {"transformer.h.3.attn.c_proj", "transformer.h.3.mlp.c_proj"}) {
      INFO(proj);
      CHECK(sample_std(p(proj, "weight")) == Approx(0.02 / std::sqrt(2.0 * 4)).epsilon(0.03));
    }
    CHECK(p("transformer.h.2.mlp.c_fc", "bias").abs().max().item() == 0.0);
    CHECK(p("transformer.h.2.ln_1", "weight").min().item() == 1.0);
    CHECK(p("transformer.ln_f", "bias").abs().max().item() == 0.0);
  }
}

}  // namespace test_tied_init
