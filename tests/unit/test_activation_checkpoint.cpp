// Activation checkpointing (nn/activation_checkpoint.h): gradchecks through a checkpointed block,
// bit-identity with checkpointing off (losses, every gradient, buffers, the generator's state),
// nesting, autocast, hooks, eval and no_grad, and the model-file and run-config keys.
#include <catch2/catch.hpp>
#include <fstream>
#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "config/config_diff.h"
#include "config/run_config.h"
#include "core/grad_mode.h"
#include "core/rng.h"
#include "nn/activation_checkpoint.h"
#include "nn/layer_registry.h"
#include "nn/layers/batch_norm.h"
#include "nn/layers/dropout.h"
#include "nn/layers/gelu.h"
#include "nn/layers/linear.h"
#include "nn/layers/sequential.h"
#include "nn/layers/tanh.h"
#include "nn/layers/transformer_block.h"
#include "nn/model_file.h"
#include "ops/autocast.h"
#include "ops/flop_counter.h"
#include "ops/ops.h"
#include "unit/error_of.h"
#include "unit/temp_dir.h"

namespace test_activation_checkpoint {

using namespace tr;
using Catch::Matchers::Contains;
using tr::test::error_of;

namespace {

using Tensors = std::vector<Tensor>;

// A small GPT (vocab 11, context 6, 2 blocks of 2 heads x 4, dropout everywhere); `block_extra`
// goes into the repeat's table, `model_extra` into the top-level sequential's.
const char* kGpt = R"(
type = "sequential"
%MODEL%
[[layers]]
type = "token_position_embedding"
vocab_size = 11
n_embd = 8
block_size = 6
dropout = 0.1
[[layers]]
type = "repeat"
times = 2
%REPEAT%
layers = [{type = "transformer_block", n_head = 2, dropout = 0.2}]
[[layers]]
type = "layer_norm"
[[layers]]
type = "linear"
out_features = 11
)";

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

nn::ModulePtr build_toml(const std::string& src, nn::ShapeInfo io) {
  toml::table tbl = toml::parse(src);
  TomlTable t(tbl, "test.toml", "model");
  return nn::build_layer(t, io);
}

// The GPT, built from the same seed each time so that every variant starts from the same weights.
nn::ModulePtr gpt(const std::string& model_extra = "", const std::string& repeat_extra = "") {
  manual_seed(11);
  return build_toml(replace(replace(kGpt, "%MODEL%", model_extra), "%REPEAT%", repeat_extra), {{6}, DType::I64});
}

struct StepResult {
  std::vector<double> losses;
  nn::NamedTensors grads;
  GeneratorState rng;
};

// Two micro-batches of the LM loss into accumulated gradients, from a fixed generator state.
StepResult lm_steps(nn::Module& m) {
  StepResult r;
  manual_seed(5);
  m.zero_grad();
  for (int micro = 0; micro < 2; ++micro) {
    Tensor ids = randint(0, 11, {3, 6}), targets = randint(0, 11, {3, 6});
    Tensor loss = cross_entropy(m(ids).reshape({-1, 11}), targets.reshape({-1}));
    loss.backward();
    r.losses.push_back(loss.item());
  }
  for (auto& [n, p] : m.named_parameters()) r.grads.emplace_back(n, p.grad());
  r.rng = default_generator().get_state();
  return r;
}

void require_identical(const StepResult& a, const StepResult& b) {
  REQUIRE(a.losses.size() == b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) CHECK(a.losses[i] == b.losses[i]);  // bit for bit
  REQUIRE(a.grads.size() == b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) {
    INFO(a.grads[i].first);
    CHECK(a.grads[i].first == b.grads[i].first);
    REQUIRE(a.grads[i].second.defined());
    REQUIRE(b.grads[i].second.defined());
    CHECK(equal(a.grads[i].second, b.grads[i].second));
  }
  CHECK(a.rng == b.rng);
}

int count_checkpointed(nn::Module& m) {
  int n = 0;
  for (auto& [p, mod] : m.named_modules()) n += mod->activation_checkpointing() ? 1 : 0;
  return n;
}

Tensors with_params(const Tensor& x, nn::Module& m) {
  Tensors in{x};
  for (auto& p : m.parameters()) in.push_back(p);
  return in;
}

}  // namespace

TEST_CASE("activation checkpointing: gradcheck through a checkpointed TransformerBlock (f64), input and parameters",
          "[checkpointing][autograd]") {
  manual_seed(5);
  nn::TransformerBlock b(4, 2);
  b.to(DType::F64);
  {
    NoGradGuard ng;
    for (auto& [n, p] : b.named_parameters())
      p.copy_(randn(p.sizes(), DType::F64) * 0.5 + (n == "ln_1.weight" ? 1.0 : 0.0));
  }
  b.set_activation_checkpointing(true);
  Tensor x = randn({2, 3, 4}, DType::F64).requires_grad_(true);
  TensorFn f = [&](const Tensors& in) { return Tensors{b(in[0])}; };
  CHECK(f({x})[0].grad_fn()->name() == "CheckpointBackward");
  auto r = gradcheck(f, with_params(x, b));
  INFO(r.message);
  CHECK(r.ok);
}

TEST_CASE("activation checkpointing: gradcheck and gradgradcheck of a checkpointed Linear-Tanh-Linear (f64)",
          "[checkpointing][autograd]") {
  manual_seed(6);
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::make_shared<nn::Linear>(3, 5)).push_back(std::make_shared<nn::Tanh>());
  seq->push_back(std::make_shared<nn::Linear>(5, 2));
  seq->to(DType::F64);
  seq->set_activation_checkpointing(true);
  Tensor x = randn({4, 3}, DType::F64).requires_grad_(true);
  TensorFn f = [&](const Tensors& in) { return Tensors{(*seq)(in[0])}; };
  auto r = gradcheck(f, with_params(x, *seq));
  INFO(r.message);
  CHECK(r.ok);
  auto r2 = gradgradcheck(f, {x});  // create_graph through the recomputation
  INFO(r2.message);
  CHECK(r2.ok);
  // an input that needs no gradient: only the parameters' edges
  Tensor c = randn({4, 3}, DType::F64);
  auto r3 = gradcheck([&](const Tensors& in) { return Tensors{(*seq)(c)*in[0]}; },
                      {randn({4, 2}, DType::F64).requires_grad_(true)});
  INFO(r3.message);
  CHECK(r3.ok);
}

TEST_CASE("activation checkpointing: a GPT with dropout is bit-identical with checkpointing on and off",
          "[checkpointing]") {
  auto off = gpt();
  StepResult ref = lm_steps(*off);
  SECTION("checkpoint = true on the repeat: one checkpoint per block") {
    auto on = gpt("", "checkpoint = true");
    CHECK(count_checkpointed(*on) == 2);
    CHECK(on->get_submodule("1.0")->activation_checkpointing());
    CHECK(on->get_submodule("1.1")->activation_checkpointing());
    require_identical(ref, lm_steps(*on));
  }
  SECTION("activation_checkpointing = \"blocks\": every TransformerBlock") {
    auto on = gpt();
    CHECK(nn::apply_activation_checkpointing(*on, "blocks", "test") == 2);
    CHECK(on->get_submodule("1.0.0")->activation_checkpointing());
    require_identical(ref, lm_steps(*on));
  }
  SECTION("nested: the whole model, the repeat and each block") {
    auto on = gpt("checkpoint = true", "checkpoint = true");
    on->set_activation_checkpointing(true);
    on->get_submodule("1")->set_activation_checkpointing(true);
    nn::apply_activation_checkpointing(*on, "blocks", "test");
    CHECK(count_checkpointed(*on) == 6);  // root, repeat, 2 copies, 2 blocks
    require_identical(ref, lm_steps(*on));
  }
  SECTION("the FLOP count (MFU's) leaves the recomputation out") {
    auto on = gpt("", "checkpoint = true");
    double f_off, f_on;
    {
      FlopCounter c;
      lm_steps(*off);
      f_off = c.flops();
    }
    {
      FlopCounter c;
      lm_steps(*on);
      f_on = c.flops();
    }
    CHECK(f_off > 0);
    CHECK(f_on == f_off);
  }
  SECTION("state_dict names do not change") {
    auto on = gpt("", "checkpoint = true");
    auto a = off->state_dict(), b = on->state_dict();
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].first == b[i].first);
  }
}

TEST_CASE("activation checkpointing: Linear + Dropout + GELU, bit-identical under autocast and with retain_graph",
          "[checkpointing]") {
  auto make = [](bool ckpt) {
    manual_seed(21);
    auto seq = std::make_shared<nn::Sequential>();
    seq->push_back(std::make_shared<nn::Linear>(6, 16)).push_back(std::make_shared<nn::Dropout>(0.3));
    seq->push_back(std::make_shared<nn::GELU>()).push_back(std::make_shared<nn::Linear>(16, 4));
    seq->set_activation_checkpointing(ckpt);
    return seq;
  };
  auto run = [](nn::Module& m, bool autocast, bool twice) {
    StepResult r;
    manual_seed(8);
    Tensor x = randn({5, 6}).requires_grad_(true);
    Tensor loss;
    {
      amp::AutocastGuard ac(DeviceType::CPU, DType::BF16, autocast);
      // Without autocast the module runs twice (two checkpoints sharing parameters). Under autocast
      // once: a parameter shared by two checkpointed calls gets its low-precision gradients summed
      // after the cast back rather than before (each recomputation casts it afresh), as in torch.
      Tensor y = m(x);
      loss = autocast ? sum(y * y) : sum(y * m(x));
    }
    loss.backward(Tensor(), twice);
    if (twice) loss.backward();
    r.losses.push_back(loss.item());
    r.grads.emplace_back("x", x.grad());
    for (auto& [n, p] : m.named_parameters()) r.grads.emplace_back(n, p.grad());
    r.rng = default_generator().get_state();
    return r;
  };
  for (bool autocast : {false, true}) {
    for (bool twice : {false, true}) {
      INFO("autocast " << autocast << ", backward twice " << twice);
      auto off = make(false), on = make(true);
      require_identical(run(*off, autocast, twice), run(*on, autocast, twice));
    }
  }
}

TEST_CASE("activation checkpointing: BatchNorm inside a checkpointed block updates its running stats once",
          "[checkpointing]") {
  auto make = [](bool ckpt) {
    manual_seed(2);
    auto seq = std::make_shared<nn::Sequential>();
    // momentum None: the cumulative average, which a second update would visibly change
    seq->push_back(std::make_shared<nn::Linear>(4, 6))
        .push_back(std::make_shared<nn::BatchNorm1d>(6, 1e-5, std::nullopt));
    seq->push_back(std::make_shared<nn::GELU>());
    seq->set_activation_checkpointing(ckpt);
    return seq;
  };
  auto off = make(false), on = make(true);
  for (auto* m : {off.get(), on.get()}) {
    manual_seed(4);
    for (int step = 0; step < 2; ++step) sum((*m)(randn({8, 4}))).backward();
  }
  auto a = off->named_buffers(), b = on->named_buffers();
  REQUIRE(a.size() == 3);
  REQUIRE(b.size() == 3);
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(equal(a[i].second, b[i].second));
  }
  CHECK(on->get_submodule("1")->tensor("num_batches_tracked").item() == 2);
  auto pa = off->named_parameters(), pb = on->named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) CHECK(equal(pa[i].second.grad(), pb[i].second.grad()));
}

TEST_CASE("activation checkpointing: eval, no_grad and frozen models run the forward as usual", "[checkpointing]") {
  auto on = gpt("", "checkpoint = true"), off = gpt();
  Tensor ids = randint(0, 11, {2, 6});
  on->eval();
  off->eval();
  {
    NoGradGuard ng;
    Tensor y = (*on)(ids);
    CHECK_FALSE(y.requires_grad());
    CHECK(equal(y, (*off)(ids)));
  }
  for (auto& p : on->parameters()) p.requires_grad_(false);  // nothing to differentiate
  Tensor y = (*on)(ids);
  CHECK_FALSE(y.requires_grad());
  CHECK(equal(y, (*off)(ids).detach()));
}

TEST_CASE("activation checkpointing: parameters' post-accumulate-grad hooks fire once per backward",
          "[checkpointing]") {
  auto on = gpt("", "checkpoint = true");
  std::map<std::string, int> fired;
  for (auto& [n, p] : on->named_parameters()) {
    std::string name = n;
    register_post_accumulate_grad_hook(p, [&fired, name](Tensor&) { ++fired[name]; });
  }
  lm_steps(*on);  // two backward calls
  CHECK(fired.size() == on->named_parameters().size());
  for (auto& [n, c] : fired) {
    INFO(n);
    CHECK(c == 2);
  }
}

TEST_CASE("activation checkpointing: an input changed in place after the forward is an error at backward",
          "[checkpointing]") {
  manual_seed(3);
  nn::Linear lin(3, 3);
  lin.set_activation_checkpointing(true);
  Tensor x = randn({2, 3}).requires_grad_(true) * 1.0;
  Tensor y = lin(x);
  {
    NoGradGuard ng;
    x.add_(1.0);
  }
  CHECK_THAT(error_of([&] { sum(y).backward(); }),
             Contains("modified by an inplace operation") && Contains("CheckpointBackward"));
}

TEST_CASE("activation checkpointing: double backward refuses a parameter also used before the checkpoint",
          "[checkpointing][autograd]") {
  manual_seed(3);
  nn::Linear lin(3, 3);
  lin.set_activation_checkpointing(true);
  Tensor inp = randn({2, 3}).requires_grad_(true);
  Tensor y = lin(matmul(inp, lin.weight));  // the weight before the checkpoint and inside it
  CHECK_THAT(error_of([&] { autograd::grad({sum(y)}, {inp}, {}, true, /*create_graph=*/true); }),
             Contains("checkpoint of Linear") && Contains("double backward"));
  // a first-order backward is fine: the outer walk adds both uses
  Tensor y2 = lin(matmul(inp, lin.weight));
  sum(y2).backward();
  Tensor g_ckpt = lin.weight.grad().clone();
  lin.set_activation_checkpointing(false);
  lin.zero_grad();
  sum(lin(matmul(inp, lin.weight))).backward();
  CHECK(equal(g_ckpt, lin.weight.grad()));
}

TEST_CASE("model files: checkpoint is a key of every layer, a non-boolean is an error naming the file and layer",
          "[checkpointing][layers]") {
  auto lin = build_toml("type = \"linear\"\nout_features = 2\ncheckpoint = true", {{3}});
  CHECK(lin->activation_checkpointing());
  CHECK_FALSE(build_toml("type = \"relu\"\ncheckpoint = false", {{3}})->activation_checkpointing());
  auto res =
      build_toml("type = \"residual\"\ncheckpoint = true\nlayers = [{type = \"linear\", out_features = 3}]", {{3}});
  CHECK(res->activation_checkpointing());

  TempDir tmp;
  std::ofstream(tmp / "m.toml") << "input = [6]\ninput_dtype = \"int64\"\n"
                                   "[[layers]]\ntype = \"token_position_embedding\"\nvocab_size = 11\nn_embd = 8\n"
                                   "block_size = 6\n[[layers]]\ntype = \"repeat\"\ntimes = 2\ncheckpoint = \"yes\"\n"
                                   "layers = [{type = \"transformer_block\", n_head = 2}]\n";
  std::string e = error_of([&] { nn::load_model_file(tmp / "m.toml"); });
  CHECK_THAT(e,
             Contains(tmp / "m.toml") && Contains("layer 1 (repeat)") && Contains("checkpoint") && Contains("boolean"));

  // the summary marks checkpointed layers
  std::ofstream(tmp / "ok.toml") << "input = [3]\n[[layers]]\ntype = \"linear\"\nout_features = 2\ncheckpoint = true\n"
                                    "[[layers]]\ntype = \"relu\"\n";
  std::string s = nn::model_summary(nn::load_model_file(tmp / "ok.toml"));
  CHECK_THAT(s, Contains("Linear") && Contains("checkpointed"));
  CHECK(s.find("checkpointed") == s.rfind("checkpointed"));  // the linear only
}

TEST_CASE("run config: [model] activation_checkpointing is \"none\" or \"blocks\"", "[checkpointing][config]") {
  const std::string base = "[model]\nfile = \"m.toml\"\n%AC%[data]\ndataset = \"synthetic\"\n";
  auto parse = [&](const std::string& ac) { return config::parse_run_config(replace(base, "%AC%", ac), "run.toml"); };
  CHECK(parse("").model.activation_checkpointing == "none");
  CHECK(parse("activation_checkpointing = \"blocks\"\n").model.activation_checkpointing == "blocks");
  CHECK(config::parse_run_config(replace(base, "%AC%", ""), "run.toml", {"model.activation_checkpointing=blocks"})
            .model.activation_checkpointing == "blocks");
  CHECK_THAT(error_of([&] { parse("activation_checkpointing = \"all\"\n"); }),
             Contains("run.toml") && Contains("activation_checkpointing") && Contains("blocks"));
  CHECK(config::harmless_change("model.activation_checkpointing"));

  nn::Linear lin(3, 3);
  CHECK_THAT(error_of([&] { nn::apply_activation_checkpointing(lin, "blocks", "run.toml: [model]"); }),
             Contains("run.toml: [model]") && Contains("no") && Contains("checkpoint = true"));
  CHECK(nn::apply_activation_checkpointing(lin, "none", "run.toml: [model]") == 0);
}

}  // namespace test_activation_checkpoint
