// Transformer layers (CausalSelfAttention, TransformerBlock, TokenPositionEmbedding), Residual/repeat
// containers and the losses: shapes, causality, nanoGPT's state_dict keys, gradchecks, TOML building,
// errors, and numbers against PyTorch from tests/fixtures/transformer_fixtures.json (written by
// generators/make_transformer_fixtures.py).
#include <catch2/catch.hpp>
#include "unit/error_of.h"
#include "unit/fixtures.h"
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/grad_mode.h"
#include "core/rng.h"
#include "nn/layer_registry.h"
#include "nn/layers/causal_self_attention.h"
#include "nn/layers/relu.h"
#include "nn/layers/residual.h"
#include "nn/layers/sequential.h"
#include "nn/layers/tanh.h"
#include "nn/layers/token_embedding.h"
#include "nn/layers/transformer_block.h"
#include "nn/losses/bce_with_logits_loss.h"
#include "nn/losses/cross_entropy_loss.h"
#include "nn/losses/mse_loss.h"
#include "ops/autocast.h"
#include "ops/ops.h"

namespace test_transformer {

using json = nlohmann::json;
using namespace tr;
using Catch::Matchers::Contains;
using tr::test::error_of;

namespace {

using Tensors = std::vector<Tensor>;

std::vector<std::string> keys_of(const nn::StateDict& sd) {
  std::vector<std::string> k;
  for (auto& [n, t] : sd) k.push_back(n);
  return k;
}

// Builds a layer from TOML source (the top table has `type`), threading `io`.
nn::ModulePtr build_toml(const std::string& src, nn::ShapeInfo& io) {
  toml::table tbl = toml::parse(src);
  TomlTable t(tbl, "test.toml", "model");
  return nn::build_layer(t, io);
}

std::string build_error(const std::string& src, nn::ShapeInfo io) {
  try {
    build_toml(src, io);
  } catch (const Error& e) { return e.what(); }
  return "(no error)";
}

void require_gradcheck(const TensorFn& f, const Tensors& in, bool second_order = false) {
  auto r = gradcheck(f, in);
  INFO(r.message);
  CHECK(r.ok);
  if (second_order) {
    auto r2 = gradgradcheck(f, in);
    INFO(r2.message);
    CHECK(r2.ok);
  }
}

// Input x (requires grad) followed by the module's parameters: gradcheck perturbs them in place.
Tensors with_params(const Tensor& x, nn::Module& m) {
  Tensors in{x};
  for (auto& p : m.parameters()) in.push_back(p);
  return in;
}

double max_abs(const Tensor& t) { return amax(abs(t.detach())).item(); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// CausalSelfAttention

TEST_CASE("CausalSelfAttention: shapes, nanoGPT's state_dict keys and repr", "[layers][transformer]") {
  nn::CausalSelfAttention a(8, 2);
  CHECK(a(randn({2, 5, 8})).sizes() == Shape{2, 5, 8});
  CHECK(a(randn({5, 8})).sizes() == Shape{5, 8});  // unbatched
  CHECK(keys_of(a.state_dict()) ==
        std::vector<std::string>{"c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias"});
  CHECK(a.c_attn->weight.sizes() == Shape{24, 8});
  CHECK(a.named_buffers().empty());  // the causal mask is not state
  nn::CausalSelfAttention nb(6, 3, 0.1, false);
  CHECK(keys_of(nb.state_dict()) == std::vector<std::string>{"c_attn.weight", "c_proj.weight"});
  CHECK_THAT(a.repr(), Contains("CausalSelfAttention(\n  n_embd=8, n_head=2, dropout=0\n  (c_attn): "
                                "Linear(in_features=8, out_features=24, bias=True)"));
  CHECK_THAT(error_of([] { nn::CausalSelfAttention(10, 3); }), Contains("n_embd = 10 is not divisible by n_head = 3"));
  CHECK_THAT(error_of([&] { a(randn({2, 5, 6})); }), Contains("[2, 5, 6]"));
}

TEST_CASE("CausalSelfAttention is causal: output t has zero gradient w.r.t. inputs after t", "[layers][transformer]") {
  manual_seed(7);
  const int64_t B = 2, T = 5, C = 8;
  nn::CausalSelfAttention a(C, 2);
  a.to(DType::F64);
  Tensor x = randn({B, T, C}, DType::F64).requires_grad_(true);
  Tensor y = a(x);
  for (int64_t t = 0; t < T; ++t) {
    Tensor g = autograd::grad({sum(y.narrow(1, t, 1))}, {x}, {}, true)[0];  // [B, T, C]
    INFO("output position t = " << t);
    for (int64_t s = 0; s < T; ++s) {
      INFO("input position " << s);
      double m = max_abs(g.narrow(1, s, 1));
      if (s > t)
        CHECK(m == 0.0);
      else
        CHECK(m > 1e-8);
    }
  }
  // and the values: changing a future token leaves earlier outputs bit-identical
  Tensor x2 = x.detach().clone();
  x2.narrow(1, 3, 1).fill_(5.0);
  Tensor y2 = a(x2);
  CHECK(equal(y.detach().narrow(1, 0, 3), y2.detach().narrow(1, 0, 3)));
  CHECK_FALSE(equal(y.detach().narrow(1, 3, 1), y2.detach().narrow(1, 3, 1)));
}

TEST_CASE("CausalSelfAttention: mask per sequence length, dropout only in train mode", "[layers][transformer]") {
  manual_seed(3);
  nn::CausalSelfAttention a(8, 4, 0.5);
  Tensor x5 = randn({2, 5, 8}), x3 = x5.narrow(1, 0, 3).contiguous();
  a.eval();
  Tensor y5 = a(x5);
  Tensor y3 = a(x3);  // a shorter T rebuilds the mask; causality makes it the prefix of y5
  CHECK(allclose(y3, y5.narrow(1, 0, 3), 1e-5, 1e-6));
  CHECK(equal(a(x5), y5));  // deterministic in eval
  a.train();
  Tensor t1 = a(x5), t2 = a(x5);
  CHECK_FALSE(equal(t1, t2));
  CHECK_FALSE(equal(t1, y5));
  nn::CausalSelfAttention nod(8, 4, 0.0);
  nod.train();
  CHECK(equal(nod(x5), nod(x5)));
}

TEST_CASE("CausalSelfAttention gradcheck and gradgradcheck (f64, B=2 T=3 C=4 nh=2)", "[layers][transformer]") {
  manual_seed(11);
  nn::CausalSelfAttention a(4, 2);
  a.to(DType::F64);
  Tensor x = randn({2, 3, 4}, DType::F64).requires_grad_(true);
  TensorFn f = [&](const Tensors& in) { return Tensors{a(in[0])}; };
  require_gradcheck(f, with_params(x, a));
  require_gradcheck(f, {x}, /*second_order=*/true);
  nn::CausalSelfAttention nb(4, 2, 0.0, false);
  nb.to(DType::F64);
  TensorFn g = [&](const Tensors& in) { return Tensors{nb(in[0])}; };
  require_gradcheck(g, with_params(x, nb));
}

// ---------------------------------------------------------------------------------------------
// TransformerBlock

TEST_CASE("TransformerBlock: nanoGPT's Block state_dict keys, shapes", "[layers][transformer]") {
  nn::TransformerBlock b(8, 2);
  CHECK(keys_of(b.state_dict()) ==
        std::vector<std::string>{"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                                 "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                 "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"});
  CHECK(b.mlp->c_fc->weight.sizes() == Shape{32, 8});
  CHECK(b.mlp->c_proj->weight.sizes() == Shape{8, 32});
  CHECK(b.ln_1->tensor("weight").tolist() == std::vector<double>(8, 1.0));
  CHECK(b.ln_1->tensor("bias").tolist() == std::vector<double>(8, 0.0));
  CHECK(b(randn({2, 5, 8})).sizes() == Shape{2, 5, 8});
  CHECK(b(randn({5, 8})).sizes() == Shape{5, 8});
  nn::TransformerBlock nb(8, 2, 0.0, false, "tanh");
  CHECK(keys_of(nb.state_dict()) == std::vector<std::string>{"ln_1.weight", "attn.c_attn.weight", "attn.c_proj.weight",
                                                             "ln_2.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"});
  CHECK(b.num_parameters() == 2 * 16 + (8 * 24 + 24) + (8 * 8 + 8) + (8 * 32 + 32) + (32 * 8 + 8));
  CHECK_THAT(error_of([] { nn::TransformerBlock(8, 2, 0.0, true, "fast"); }), Contains("'fast'"));
  CHECK_THAT(b.repr(), Contains("(ln_1): LayerNorm((8,), eps=1e-05, elementwise_affine=True)"));
  CHECK_THAT(b.repr(), Contains("(mlp): MLP(\n    gelu='none', dropout=0"));
}

TEST_CASE("TransformerBlock gradcheck (f64, B=2 T=3 C=4 nh=2), both gelu forms", "[layers][transformer]") {
  manual_seed(5);
  for (std::string gelu : {"none", "tanh"}) {
    INFO("gelu " << gelu);
    nn::TransformerBlock b(4, 2, 0.0, true, gelu);
    b.to(DType::F64);
    // random LayerNorm affine so that its gradients are exercised away from (1, 0)
    {
      NoGradGuard ng;
      for (auto& [n, p] : b.named_parameters())
        p.copy_(randn(p.sizes(), DType::F64) * 0.5 + (n == "ln_1.weight" ? 1.0 : 0.0));
    }
    Tensor x = randn({2, 3, 4}, DType::F64).requires_grad_(true);
    TensorFn f = [&](const Tensors& in) { return Tensors{b(in[0])}; };
    require_gradcheck(f, with_params(x, b));
    if (gelu == "tanh") require_gradcheck(f, {x}, /*second_order=*/true);
  }
}

// ---------------------------------------------------------------------------------------------
// TokenPositionEmbedding

TEST_CASE("TransformerBlock under bf16 autocast: the fused norms give the composite chain's numbers bit for bit",
          "[layers][transformer]") {
  // under autocast the block's norms write bf16 and ln_2 takes in the residual add; the chain they
  // replace is h = x + attn(ln_1(x)), y = h + mlp(ln_2(h)) through the block's own modules
  manual_seed(5);
  nn::TransformerBlock b(32, 4, 0.0, true, "tanh");
  Generator g(6);
  const Tensor x0 = randn({2, 9, 32}, DType::F32, &g), gy = randn({2, 9, 32}, DType::F32, &g);
  auto run = [&](bool fused) {
    b.zero_grad();
    Tensor x = x0.detach().requires_grad_(true);
    Tensor y;
    {
      amp::AutocastGuard ac(DeviceType::CPU, DType::BF16);
      if (fused) {
        y = b(x);
      } else {
        Tensor h = x + (*b.attn)((*b.ln_1)(x));
        y = h + (*b.mlp)((*b.ln_2)(h));
      }
    }
    y.backward(gy);
    std::vector<Tensor> r{y.detach(), x.grad()};
    for (const Tensor& p : b.parameters()) r.push_back(p.grad());
    return r;
  };
  const auto fused = run(true), comp = run(false);
  REQUIRE(fused.size() == comp.size());
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO("result " << i << " (0: y, 1: dx, then the parameters' gradients)");
    CHECK(fused[i].dtype() == comp[i].dtype());
    CHECK(equal(fused[i], comp[i]));
  }
}

TEST_CASE("TokenPositionEmbedding: ids [T] and [B, T], N(0, 0.02) init, block_size limit", "[layers][transformer]") {
  manual_seed(1);
  nn::TokenPositionEmbedding e(1000, 64, 16);
  CHECK(keys_of(e.state_dict()) == std::vector<std::string>{"wte.weight", "wpe.weight"});
  Tensor wte = e.wte->tensor("weight"), wpe = e.wpe->tensor("weight");
  CHECK(wte.sizes() == Shape{1000, 64});
  CHECK(wpe.sizes() == Shape{16, 64});
  CHECK(std::abs(tr::std(wte).item() - 0.02) < 0.0005);
  CHECK(std::abs(mean(wte).item()) < 0.0005);
  Tensor ids = tensor({3, 1, 4, 1, 5}, DType::I64);
  Tensor y = e(ids);
  CHECK(y.sizes() == Shape{5, 64});
  // row t = wte[ids[t]] + wpe[t]
  CHECK(allclose(y[2], wte[4] + wpe[2]));
  CHECK(allclose(y[3], wte[1] + wpe[3]));
  Tensor yb = e(stack({ids, ids}));
  CHECK(yb.sizes() == Shape{2, 5, 64});
  CHECK(allclose(yb[1], y));
  CHECK_THAT(error_of([&] { e(zeros({17}, DType::I64)); }), Contains("sequence of length 17, block_size is only 16"));
  CHECK_THAT(error_of([&] { e(zeros({5})); }), Contains("integer token ids"));
  // gradients reach the rows used (row 1 twice)
  sum(y).backward();
  CHECK(wte.grad()[1].tolist() == std::vector<double>(64, 2.0));
  CHECK(wte.grad()[0].tolist() == std::vector<double>(64, 0.0));
  CHECK(wpe.grad()[4].tolist() == std::vector<double>(64, 1.0));
  CHECK(wpe.grad()[5].tolist() == std::vector<double>(64, 0.0));
}

TEST_CASE("TokenPositionEmbedding gradcheck w.r.t. both tables", "[layers][transformer]") {
  manual_seed(2);
  nn::TokenPositionEmbedding e(5, 3, 4);
  e.to(DType::F64);
  Tensor ids = tensor({{0, 4, 4}, {2, 1, 0}}, DType::I64);
  TensorFn f = [&](const Tensors&) { return Tensors{e(ids)}; };
  require_gradcheck(f, e.parameters(), /*second_order=*/true);
}

// ---------------------------------------------------------------------------------------------
// Residual and repeat

TEST_CASE("Residual: body + shortcut (identity when absent), activation after the sum", "[layers][transformer]") {
  manual_seed(4);
  auto body = std::make_shared<nn::Sequential>();
  body->push_back(std::make_shared<nn::Linear>(4, 4));
  nn::Residual r(body);
  Tensor x = randn({3, 4});
  CHECK(allclose(r(x), (*body)(x) + x));
  CHECK(keys_of(r.state_dict()) == std::vector<std::string>{"body.0.weight", "body.0.bias"});

  auto sc = std::make_shared<nn::Sequential>();
  sc->push_back(std::make_shared<nn::Linear>(4, 4, false));
  nn::Residual rs(body, sc, std::make_shared<nn::ReLU>());
  CHECK(allclose(rs(x), relu((*body)(x) + (*sc)(x))));
  CHECK(keys_of(rs.state_dict()) == std::vector<std::string>{"body.0.weight", "body.0.bias", "shortcut.0.weight"});
  CHECK_THAT(rs.repr(), Contains("(activation): ReLU"));

  auto narrow_body = std::make_shared<nn::Sequential>();
  narrow_body->push_back(std::make_shared<nn::Linear>(4, 3));
  nn::Residual bad(narrow_body);
  std::string msg = error_of([&] { bad(x); });
  CHECK_THAT(msg, Contains("[3, 3]"));
  CHECK_THAT(msg, Contains("[3, 4]"));
}

TEST_CASE("Residual gradcheck (f64) with and without a shortcut", "[layers][transformer]") {
  manual_seed(6);
  for (bool with_shortcut : {false, true}) {
    INFO("shortcut " << with_shortcut);
    // body [Linear 4->5, attention] + Linear shortcut, or body [attention] + identity
    auto body = std::make_shared<nn::Sequential>();
    nn::ModulePtr sc;
    if (with_shortcut) {
      body->push_back(std::make_shared<nn::Linear>(4, 5));
      body->push_back(std::make_shared<nn::CausalSelfAttention>(5, 1));
      auto s = std::make_shared<nn::Sequential>();
      s->push_back(std::make_shared<nn::Linear>(4, 5));
      sc = s;
    } else {
      body->push_back(std::make_shared<nn::CausalSelfAttention>(4, 2));
    }
    nn::Residual r(body, sc, with_shortcut ? std::make_shared<nn::Tanh>() : nullptr);
    r.to(DType::F64);
    Tensor x = randn({2, 3, 4}, DType::F64).requires_grad_(true);
    TensorFn f = [&](const Tensors& in) { return Tensors{r(in[0])}; };
    require_gradcheck(f, with_params(x, r));
  }
}

TEST_CASE("TOML residual and repeat: shapes, keys, fresh weights, errors", "[layers][transformer]") {
  nn::ShapeInfo io{{5, 8}};
  auto m = build_toml(R"(
    type = "residual"
    activation = "gelu"
    layers = [{type = "linear", out_features = 16}, {type = "linear", out_features = 4}]
    shortcut = [{type = "linear", out_features = 4, bias = false}]
  )",
                      io);
  CHECK(io.shape == Shape{5, 4});
  CHECK(keys_of(m->state_dict()) ==
        std::vector<std::string>{"body.0.weight", "body.0.bias", "body.1.weight", "body.1.bias", "shortcut.0.weight"});
  CHECK((*m)(randn({2, 5, 8})).sizes() == Shape{2, 5, 4});

  nn::ShapeInfo io2{{5, 8}};
  auto rep = build_toml(R"(
    type = "repeat"
    times = 3
    layers = [{type = "transformer_block", n_head = 2}, {type = "linear", out_features = 8}]
  )",
                        io2);
  CHECK(io2.shape == Shape{5, 8});
  auto keys = keys_of(rep->state_dict());
  CHECK(keys.size() == 3 * 14);
  CHECK(keys.front() == "0.0.ln_1.weight");
  CHECK(keys.back() == "2.1.bias");
  CHECK(std::set<std::string>(keys.begin(), keys.end()).count("1.0.mlp.c_fc.bias") == 1);
  Tensor w0 = rep->get_submodule("0.1")->tensor("weight"), w1 = rep->get_submodule("1.1")->tensor("weight");
  CHECK_FALSE(equal(w0, w1));  // fresh weights per copy
  CHECK((*rep)(randn({2, 5, 8})).sizes() == Shape{2, 5, 8});

  // the body's output must equal the shortcut's: the error names the layer and both shapes
  std::string msg = build_error(R"(
    type = "residual"
    layers = [{type = "linear", out_features = 3}]
  )",
                                nn::ShapeInfo{{5, 8}});
  CHECK_THAT(msg, Contains("model"));
  CHECK_THAT(msg, Contains("body's output shape [5, 3]"));
  CHECK_THAT(msg, Contains("[5, 8]"));
  msg = build_error(R"(
    type = "residual"
    layers = [{type = "linear", out_features = 3}]
    shortcut = [{type = "linear", out_features = 2}]
  )",
                    nn::ShapeInfo{{8}});
  CHECK_THAT(msg, Contains("body's output shape [3] does not equal the shortcut's output shape [2]"));
  CHECK_THAT(build_error("type = \"repeat\"\ntimes = 0\nlayers = []", nn::ShapeInfo{{8}}), Contains("at least 1"));
  // the activation is any layer of the registry that keeps the shape
  CHECK_THAT(build_error("type = \"residual\"\nactivation = \"rellu\"\nlayers = []", nn::ShapeInfo{{8}}),
             Contains("test.toml:2:") && Contains("'activation'") && Contains("unknown layer type 'rellu'") &&
                 Contains("did you mean 'relu'"));
  CHECK_THAT(build_error("type = \"residual\"\nactivation = {type = \"linear\", out_features = 3}\nlayers = []",
                         nn::ShapeInfo{{8}}),
             Contains("the activation changes the shape [8] to [3]; it must keep it"));
  CHECK(build_error("type = \"residual\"\nactivation = \"relu6\"\nlayers = []", nn::ShapeInfo{{8}}) == "(no error)");
  {
    nn::ShapeInfo gio{{8}};
    auto g =
        build_toml("type = \"residual\"\nactivation = {type = \"gelu\", approximate = \"tanh\"}\nlayers = []", gio);
    Tensor x = randn({2, 8});
    CHECK(allclose((*g)(x), gelu(x + x, "tanh")));
  }
  // an error inside the body names where it is
  CHECK_THAT(build_error("type = \"residual\"\nlayers = [{type = \"linear\", out_feature = 3}]", nn::ShapeInfo{{8}}),
             Contains("body layer 0 (linear)"));
}

// ---------------------------------------------------------------------------------------------
// TOML: a GPT built through the registry

TEST_CASE("TOML GPT: token_position_embedding, repeat of transformer_block, linear head", "[layers][transformer]") {
  const char* src = R"(
    type = "sequential"
    [[layers]]
    type = "token_position_embedding"
    vocab_size = 13
    n_embd = 8
    block_size = 6
    dropout = 0.1
    [[layers]]
    type = "repeat"
    times = 2
    layers = [{type = "transformer_block", n_head = 2, dropout = 0.1, gelu = "tanh"}]
    [[layers]]
    type = "causal_self_attention"
    n_head = 4
    bias = false
    [[layers]]
    type = "linear"
    out_features = 13
  )";
  nn::ShapeInfo io{{6}, DType::I64};
  auto gpt = build_toml(src, io);
  CHECK(io.shape == Shape{6, 13});
  CHECK(io.dtype == DType::F32);
  auto keys = keys_of(gpt->state_dict());
  CHECK(keys.size() == 2 + 2 * 12 + 2 + 2);
  CHECK(keys[0] == "0.wte.weight");
  CHECK(keys[1] == "0.wpe.weight");
  CHECK(keys[2] == "1.0.0.ln_1.weight");
  CHECK(keys[2 + 12 + 8] == "1.1.0.mlp.c_fc.weight");
  CHECK(keys[26] == "2.c_attn.weight");
  CHECK(keys.back() == "3.bias");
  auto blk = std::dynamic_pointer_cast<nn::TransformerBlock>(gpt->get_submodule("1.1.0"));
  REQUIRE(blk);
  CHECK(blk->mlp->gelu == "tanh");
  CHECK(blk->attn->dropout == 0.1);

  manual_seed(9);
  gpt->eval();
  Tensor ids = randint(0, 13, {3, 6});
  Tensor logits = (*gpt)(ids);
  CHECK(logits.sizes() == Shape{3, 6, 13});
  Tensor targets = randint(0, 13, {3, 6});
  Tensor loss = cross_entropy(logits.reshape({-1, 13}), targets.reshape({-1}));
  CHECK(std::abs(loss.item() - std::log(13.0)) < 1.5);  // near chance
  loss.backward();
  for (auto& [n, p] : gpt->named_parameters()) {
    INFO(n);
    CHECK(p.grad().defined());
  }
  CHECK((*gpt)(randint(0, 13, {4})).sizes() == Shape{4, 13});  // shorter sequences are fine
}

TEST_CASE("TOML transformer layers: inferred n_embd, key errors with suggestions", "[layers][transformer]") {
  nn::ShapeInfo io{{7, 12}};
  auto a = build_toml("type = \"causal_self_attention\"\nn_head = 3\ndropout = 0.2", io);
  auto ca = std::dynamic_pointer_cast<nn::CausalSelfAttention>(a);
  REQUIRE(ca);
  CHECK(ca->n_embd == 12);
  CHECK(ca->dropout == 0.2);
  CHECK(io.shape == Shape{7, 12});

  // unknown key: nearest-key suggestion
  std::string msg = build_error("type = \"transformer_block\"\nn_head = 2\ndropuot = 0.1", nn::ShapeInfo{{4, 8}});
  CHECK_THAT(msg, Contains("unknown key 'dropuot'"));
  CHECK_THAT(msg, Contains("did you mean 'dropout'?"));
  msg = build_error("type = \"token_position_embedding\"\nvocab_size = 5\nn_embd = 4\nblock_size = 8\nblocksize = 8",
                    nn::ShapeInfo{{4}, DType::I64});
  CHECK_THAT(msg, Contains("did you mean 'block_size'?"));
  CHECK_THAT(build_error("type = \"causal_self_attention\"\nn_heads = 2", nn::ShapeInfo{{4, 8}}),
             Contains("missing required key 'n_head'"));
  CHECK_THAT(build_error("type = \"causal_self_attention\"\nn_head = 3", nn::ShapeInfo{{4, 8}}),
             Contains("must be positive and divide n_embd = 8"));
  CHECK_THAT(build_error("type = \"causal_self_attention\"\nn_head = 2\nn_embd = 16", nn::ShapeInfo{{4, 8}}),
             Contains("n_embd = 16 does not match the input shape [4, 8]"));
  CHECK_THAT(build_error("type = \"transformer_block\"\nn_head = 2", nn::ShapeInfo{{8}}),
             Contains("expects a per-sample input of shape [T, C], but the previous layer gives [8]"));
  CHECK_THAT(build_error("type = \"transformer_block\"\nn_head = 2\ngelu = \"tanhh\"", nn::ShapeInfo{{4, 8}}),
             Contains("did you mean 'tanh'?"));
  CHECK_THAT(build_error("type = \"transformer_block\"\nn_head = 2\ndropout = 1.5", nn::ShapeInfo{{4, 8}}),
             Contains("must be in [0, 1)"));
  CHECK_THAT(build_error("type = \"token_position_embedding\"\nvocab_size = 5\nn_embd = 4\nblock_size = 8",
                         nn::ShapeInfo{{4}}),
             Contains("expects integer token ids (int64), but the input is [4]"));
  CHECK_THAT(build_error("type = \"token_position_embedding\"\nvocab_size = 5\nn_embd = 4\nblock_size = 8",
                         nn::ShapeInfo{{9}, DType::I64}),
             Contains("T = 9 (input [9] int64) exceeds block_size = 8"));
  for (const char* t :
       {"causal_self_attention", "transformer_block", "token_position_embedding", "residual", "repeat"}) {
    INFO(t);
    CHECK(Registry<nn::LayerType>::get().all().count(t) == 1);
  }
}

// ---------------------------------------------------------------------------------------------
// Losses

TEST_CASE("losses: gradcheck and gradgradcheck (f64)", "[layers][transformer][losses]") {
  manual_seed(21);
  Tensor x = randn({5, 4}, DType::F64).requires_grad_(true);
  Tensor t = tensor({1, -100, 3, 0, 2}, DType::I64);
  for (std::string red : {"mean", "sum", "none"}) {
    for (double ls : {0.0, 0.2}) {
      INFO("cross_entropy " << red << " ls " << ls);
      TensorFn f = [&](const Tensors& in) { return Tensors{cross_entropy(in[0], t, -100, ls, red)}; };
      require_gradcheck(f, {x}, /*second_order=*/true);
    }
  }
  {
    INFO("cross_entropy [N, C, d] with ignore_index = 1");
    Tensor x3 = randn({2, 3, 4}, DType::F64).requires_grad_(true);
    Tensor t3 = tensor({{0, 1, 2, 2}, {1, 1, 0, 2}}, DType::I64);
    TensorFn f = [&](const Tensors& in) { return Tensors{cross_entropy(in[0], t3, 1, 0.1, "none")}; };
    require_gradcheck(f, {x3}, true);
  }
  {
    INFO("cross_entropy with probabilities");
    Tensor p = softmax(randn({5, 4}, DType::F64), 1).requires_grad_(true);
    TensorFn f = [&](const Tensors& in) { return Tensors{cross_entropy(in[0], in[1], -100, 0.1)}; };
    require_gradcheck(f, {x, p}, true);
  }
  Tensor y = randn({5, 4}, DType::F64).requires_grad_(true);
  for (std::string red : {"mean", "sum", "none"}) {
    INFO("mse " << red);
    TensorFn f = [&](const Tensors& in) { return Tensors{mse_loss(in[0], in[1], red)}; };
    require_gradcheck(f, {x, y}, true);
  }
  // BCE: logits including 0 exactly and far out; soft labels; pos_weight per class (gradient too)
  Tensor z = (randn({5, 4}, DType::F64) * 3.0).detach();
  {
    NoGradGuard ng;
    z[0][0].fill_(0.0);
    z[1][1].fill_(40.0);
    z[2][2].fill_(-40.0);
  }
  z.requires_grad_(true);
  Tensor lab = rand({5, 4}, DType::F64).requires_grad_(true);
  Tensor pw = tensor({0.5, 1.0, 2.0, 4.0}, DType::F64).requires_grad_(true);
  for (std::string red : {"mean", "sum", "none"}) {
    INFO("bce " << red);
    TensorFn f = [&](const Tensors& in) { return Tensors{binary_cross_entropy_with_logits(in[0], in[1], red)}; };
    require_gradcheck(f, {z, lab}, true);
    TensorFn g = [&](const Tensors& in) { return Tensors{binary_cross_entropy_with_logits(in[0], in[1], red, in[2])}; };
    require_gradcheck(g, {z, lab, pw}, true);
  }
  // exact derivative at x = 0: sigmoid(0) - y
  Tensor z0 = zeros({1}, DType::F64).requires_grad_(true);
  binary_cross_entropy_with_logits(z0, ones({1}, DType::F64)).backward();
  CHECK(z0.grad().item() == Approx(-0.5).epsilon(1e-15));
}

TEST_CASE("losses: values by hand, modules, special cases", "[layers][transformer][losses]") {
  Tensor x = tensor({{1.0, 2.0, 3.0}, {1.0, 1.0, 1.0}}, DType::F64);
  Tensor t = tensor({2, 0}, DType::I64);
  double l0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0, l1 = std::log(3.0);
  CHECK(cross_entropy(x, t).item() == Approx((l0 + l1) / 2).epsilon(1e-14));
  CHECK(cross_entropy(x, t, -100, 0.0, "sum").item() == Approx(l0 + l1).epsilon(1e-14));
  CHECK(cross_entropy(x, tensor({2, -100}, DType::I64)).item() == Approx(l0).epsilon(1e-14));
  // all targets ignored: mean is 0/0 = nan (as torch), sum is 0
  CHECK(std::isnan(cross_entropy(x, tensor({-100, -100}, DType::I64)).item()));
  CHECK(cross_entropy(x, tensor({-100, -100}, DType::I64), -100, 0.1, "sum").item() == 0.0);
  // the module form
  nn::CrossEntropyLoss ce(-100, 0.1, "sum");
  CHECK(ce(x, t).item() == Approx(cross_entropy(x, t, -100, 0.1, "sum").item()).epsilon(1e-15));
  CHECK(ce.repr() == "CrossEntropyLoss(label_smoothing=0.1, reduction=sum)");
  CHECK(nn::MSELoss("sum")(tensor({1.0, 2.0}), tensor({0.0, 4.0})).item() == 5.0);
  nn::BCEWithLogitsLoss bce("mean", tensor({2.0, 3.0}));
  CHECK(keys_of(bce.state_dict()) == std::vector<std::string>{"pos_weight"});
  CHECK(bce(tensor({0.0, 0.0}), tensor({1.0, 0.0})).item() == Approx((2.0 + 1.0) * std::log(2.0) / 2).epsilon(1e-6));
  // extreme logits stay finite
  Tensor big = tensor({1000.0, -1000.0}, DType::F64);
  Tensor lb = binary_cross_entropy_with_logits(big, tensor({0.0, 1.0}, DType::F64), "none");
  CHECK(lb.tolist() == std::vector<double>{1000.0, 1000.0});
  CHECK(binary_cross_entropy_with_logits(big, tensor({1.0, 0.0}, DType::F64), "sum").item() == 0.0);
}

TEST_CASE("losses: errors name the shapes, dtypes and values", "[layers][transformer][losses]") {
  Tensor x = randn({4, 5});
  std::string msg = error_of([&] { cross_entropy(x, zeros({4, 2}, DType::I64)); });
  CHECK_THAT(msg, Contains("target of shape [4, 2] does not match input of shape [4, 5]"));
  CHECK_THAT(msg, Contains("expected class indices of shape [4]"));
  msg = error_of([&] { cross_entropy(x, tensor({0, 7, 1, 2}, DType::I64)); });
  CHECK_THAT(msg, Contains("target 7 is out of bounds for 5 classes"));
  CHECK_THAT(error_of([&] { cross_entropy(x, tensor({0, -3, 1, 2}, DType::I64)); }), Contains("target -3"));
  CHECK_THAT(error_of([&] { cross_entropy(x, zeros({4}, DType::Bool)); }), Contains("got bool"));
  CHECK_THAT(error_of([&] {
               cross_entropy(x, zeros({4, 4}));
             }),
             Contains("probability targets must have the input's shape [4, 5], got [4, 4]"));
  CHECK_THAT(error_of([&] { cross_entropy(zeros({4}, DType::I64), zeros({}, DType::I64)); }),
             Contains("input must be a floating tensor, got int64"));
  CHECK_THAT(error_of([&] { cross_entropy(x, zeros({4}, DType::I64), -100, 0.0, "avg"); }),
             Contains("reduction is 'avg', expected one of 'mean', 'sum', 'none'"));
  CHECK_THAT(error_of([&] {
               mse_loss(x, randn({4, 1}), "mean");
             }),
             Contains("target of shape [4, 1] does not match input of shape [4, 5]"));
  CHECK_THAT(error_of([&] {
               binary_cross_entropy_with_logits(x, zeros({4, 5}, DType::I64));
             }),
             Contains("target must be a floating tensor"));
  CHECK_THAT(error_of([&] {
               binary_cross_entropy_with_logits(x, zeros({4, 5}), "mean", ones({3}));
             }),
             Contains("pos_weight"));
  CHECK_THAT(error_of([] { nn::MSELoss("average"); }), Contains("'average'"));
}

// ---------------------------------------------------------------------------------------------
// Numbers against PyTorch

namespace {

const json& fixtures() { return fixture_json("transformer_fixtures.json"); }

double decode_value(const json& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "nan") return NAN;
    return s == "inf" ? INFINITY : -INFINITY;
  }
  return v.get<double>();
}

Tensor decode(const json& t) {
  std::vector<double> v;
  for (auto& e : t.at("values")) v.push_back(decode_value(e));
  return from_vector(v, t.at("shape").get<Shape>(), dtype_from_name(t.at("dtype").get<std::string>()));
}

// Empty when equal within |got - want| <= atol + rtol |want| (nan matching nan), else the first difference.
std::string compare(const Tensor& got, const json& want, double rtol, double atol) {
  Shape ws = want.at("shape").get<Shape>();
  if (!got.defined()) return "ours is undefined";
  if (got.sizes() != ws) return str("shape: ours ", got.sizes(), " vs torch ", ws);
  if (want.at("dtype").get<std::string>() != dtype_name(got.dtype()))
    return str("dtype: ours ", dtype_name(got.dtype()), " vs torch ", want.at("dtype").get<std::string>());
  std::vector<double> g = got.tolist();
  int64_t bad = 0;
  std::string first;
  for (size_t i = 0; i < g.size(); ++i) {
    double a = g[i], b = decode_value(want.at("values")[i]);
    bool ok = (std::isnan(a) || std::isnan(b))   ? (std::isnan(a) && std::isnan(b))
              : (std::isinf(a) || std::isinf(b)) ? a == b
                                                 : std::abs(a - b) <= atol + rtol * std::abs(b);
    if (!ok && bad++ == 0) {
      std::ostringstream o;
      o.precision(17);
      o << "flat element " << i << ": ours " << a << " vs torch " << b << " (|diff| " << std::abs(a - b) << ")";
      first = o.str();
    }
  }
  return bad ? str(bad, " of ", g.size(), " elements differ; first at ", first) : "";
}

// trainer's counterpart of each torch module of make_transformer_fixtures.py.
nn::ModulePtr build_fixture_module(const json& c) {
  const std::string kind = c.at("kind");
  const json& cfg = c.at("config");
  if (kind == "attention")
    return std::make_shared<nn::CausalSelfAttention>(cfg.at("n_embd"), cfg.at("n_head"), 0.0, cfg.at("bias"));
  if (kind == "block")
    return std::make_shared<nn::TransformerBlock>(cfg.at("n_embd"), cfg.at("n_head"), 0.0, cfg.at("bias"),
                                                  cfg.at("gelu").get<std::string>());
  if (kind == "token_embedding")
    return std::make_shared<nn::TokenPositionEmbedding>(cfg.at("vocab_size"), cfg.at("n_embd"), cfg.at("block_size"));
  Shape in = c.at("input").at("shape").get<Shape>();
  nn::ShapeInfo io{Shape(in.begin() + 1, in.end())};
  if (kind == "residual_linear")
    return build_toml(R"(
      type = "residual"
      activation = "relu"
      layers = [{type = "linear", out_features = 6}, {type = "linear", out_features = 3}]
      shortcut = [{type = "linear", out_features = 3}]
    )",
                      io);
  if (kind == "residual_attention")
    return build_toml(
        str("type = \"residual\"\nactivation = \"tanh\"\nlayers = [{type = \"causal_self_attention\", n_head = ",
            cfg.at("n_head").get<int64_t>(), "}]"),
        io);
  if (kind == "gpt") {
    io.dtype = DType::I64;
    return build_toml(str(R"(
      type = "sequential"
      [[layers]]
      type = "token_position_embedding"
      vocab_size = )",
                          cfg.at("vocab_size").get<int64_t>(), "\nn_embd = ", cfg.at("n_embd").get<int64_t>(),
                          "\nblock_size = ", cfg.at("block_size").get<int64_t>(), R"(
      [[layers]]
      type = "repeat"
      times = 2
      layers = [{type = "transformer_block", n_head = )",
                          cfg.at("n_head").get<int64_t>(), ", gelu = \"", cfg.at("gelu").get<std::string>(), R"("}]
      [[layers]]
      type = "linear"
      out_features = )",
                          cfg.at("vocab_size").get<int64_t>(), "\n"),
                      io);
  }
  throw std::runtime_error("unknown fixture kind " + kind);
}

std::vector<std::string> run_module_case(const json& c) {
  std::vector<std::string> bad;
  double rtol = c.at("rtol"), atol = c.at("atol");
  DType dt = dtype_from_name(c.at("dtype").get<std::string>());
  nn::ModulePtr m = build_fixture_module(c);
  m->to(dt);
  nn::StateDict sd;
  std::vector<std::string> torch_keys;
  for (auto& kv : c.at("state_dict")) {
    sd.emplace_back(kv[0].get<std::string>(), decode(kv[1]));
    torch_keys.push_back(kv[0]);
  }
  if (keys_of(m->state_dict()) != torch_keys)
    return {str("state_dict keys: ours ", keys_of(m->state_dict()), " vs torch ", torch_keys)};
  m->load_state_dict(sd);
  m->eval();
  Tensor x = decode(c.at("input"));
  if (x.is_floating_point()) x.requires_grad_(true);
  Tensor out = (*m)(x);
  if (auto e = compare(out, c.at("output"), rtol, atol); !e.empty()) bad.push_back("output: " + e);
  const json& obj = c.at("objective");
  Tensor loss;
  if (obj.at("kind") == "weighted_sum") {
    loss = sum(out * decode(obj.at("weight")));
  } else {
    int64_t V = out.size(-1);
    loss = cross_entropy(out.reshape({-1, V}), decode(obj.at("target")).reshape({-1}));
    if (auto e = compare(loss, obj.at("loss"), rtol, atol); !e.empty()) bad.push_back("loss: " + e);
  }
  auto named = m->named_parameters();
  Tensors wrt;
  for (auto& [n, p] : named) wrt.push_back(p);
  if (x.requires_grad()) wrt.push_back(x);
  Tensors g = autograd::grad({loss}, wrt);
  const json& pg = c.at("param_grads");
  for (size_t i = 0; i < named.size(); ++i) {
    if (pg[i][0] != named[i].first)
      bad.push_back(str("parameter ", i, ": ours ", named[i].first, " vs torch ", pg[i][0]));
    else if (auto e = compare(g[i], pg[i][1], rtol, atol); !e.empty())
      bad.push_back("grad of " + named[i].first + ": " + e);
  }
  if (x.requires_grad())
    if (auto e = compare(g.back(), c.at("input_grad"), rtol, atol); !e.empty()) bad.push_back("input grad: " + e);
  return bad;
}

std::vector<std::string> run_loss_case(const json& c) {
  std::vector<std::string> bad;
  double rtol = c.at("rtol"), atol = c.at("atol");
  const json& a = c.at("attrs");
  std::string loss = c.at("loss"), red = a.value("reduction", "mean");
  Tensor x = decode(c.at("input")).requires_grad_(true);
  Tensor y = decode(c.at("target"));
  if (y.is_floating_point()) y.requires_grad_(true);
  Tensor pw = c.at("pos_weight").is_null() ? Tensor() : decode(c.at("pos_weight"));
  Tensor out;
  if (loss == "cross_entropy")
    out = cross_entropy(x, y, a.value("ignore_index", int64_t(-100)), a.value("label_smoothing", 0.0), red);
  else if (loss == "mse")
    out = mse_loss(x, y, red);
  else
    out = binary_cross_entropy_with_logits(x, y, red, pw);
  if (auto e = compare(out, c.at("output"), rtol, atol); !e.empty()) bad.push_back("output: " + e);
  Tensors wrt{x};
  if (y.requires_grad()) wrt.push_back(y);
  Tensors g = autograd::grad({sum(out * decode(c.at("grad_weight")))}, wrt, {}, {}, false, true);
  if (auto e = compare(g[0], c.at("input_grad"), rtol, atol); !e.empty()) bad.push_back("input grad: " + e);
  if (y.requires_grad()) {
    Tensor gy = g[1].defined() ? g[1] : zeros_like(y);
    if (auto e = compare(gy, c.at("target_grad"), rtol, atol); !e.empty()) bad.push_back("target grad: " + e);
  }
  return bad;
}

template <typename Run> void run_all(const json& cases, Run run, const char* what) {
  REQUIRE(cases.size() > 0);
  int passed = 0;
  for (auto& c : cases) {
    std::vector<std::string> bad;
    try {
      bad = run(c);
    } catch (const std::exception& e) { bad.push_back(std::string("threw: ") + e.what()); }
    std::string why;
    for (auto& b : bad) why += "\n  " + b;
    INFO(what << " " << c.at("name").get<std::string>() << " (" << c.at("dtype").get<std::string>() << ")" << why);
    CHECK(bad.empty());
    passed += bad.empty();
  }
  WARN(what << " fixtures: " << passed << " of " << cases.size() << " passed");
}

}  // namespace

TEST_CASE("transformer modules equal PyTorch (nanoGPT) on the fixtures", "[layers][transformer][fixtures]") {
  run_all(fixtures().at("modules"), run_module_case, "module");
}

TEST_CASE("losses equal PyTorch on the fixtures", "[layers][transformer][fixtures][losses]") {
  run_all(fixtures().at("losses"), run_loss_case, "loss");
}

}  // namespace test_transformer
