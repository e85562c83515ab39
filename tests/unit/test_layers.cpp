// The nn layers of lib/nn/layers (Conv2d, pooling, BatchNorm, LayerNorm, Dropout, Embedding, Flatten,
// activations): shapes, state_dict keys, gradcheck / gradgradcheck in f64, train vs eval, building
// from TOML with shape inference, errors, and equality with PyTorch on
// tests/fixtures/layer_fixtures.json (written by generators/make_layer_fixtures.py).
#include <catch2/catch.hpp>
#include "unit/error_of.h"
#include "unit/fixtures.h"
#include <algorithm>
#include <cctype>
#include <set>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include "core/grad_mode.h"
#include "autograd/gradcheck.h"
#include "nn/layer_registry.h"
#include "nn/layers/gelu.h"
#include "nn/layers/relu.h"
#include "nn/layers/relu6.h"
#include "nn/layers/sigmoid.h"
#include "nn/layers/silu.h"
#include "nn/layers/softplus.h"
#include "nn/layers/tanh.h"
#include "nn/repr.h"
#include "nn/layers/adaptive_avg_pool2d.h"
#include "nn/layers/avg_pool2d.h"
#include "nn/layers/batch_norm.h"
#include "nn/layers/conv2d.h"
#include "nn/layers/dropout.h"
#include "nn/layers/embedding.h"
#include "nn/layers/flatten.h"
#include "nn/layers/layer_norm.h"
#include "nn/layers/linear.h"
#include "nn/layers/max_pool2d.h"
#include "ops/ops.h"

namespace test_layers {

using json = nlohmann::json;
using namespace tr;
using tr::test::error_of;

namespace {

std::vector<std::string> keys_of(const nn::StateDict& sd) {
  std::vector<std::string> k;
  for (auto& [n, t] : sd) k.push_back(n);
  return k;
}

Tensor randn64(const Shape& s, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  return randn(s, DType::F64, &g) * scale;
}

// Values with |x| >= margin (finite differences stay clear of a kink at 0).
Tensor away_from_zero(const Tensor& x, double margin = 0.2) { return x + sign(x) * margin; }

// gradcheck (and gradgradcheck when `second`) of m(x) w.r.t. x (if floating) and every parameter, in f64.
void check_grads(nn::Module& m, const Tensor& x_in, bool second = true, const std::function<void()>& before = {}) {
  m.to(DType::F64);
  Tensor x = x_in.is_floating_point() ? x_in.to(DType::F64).detach().contiguous().requires_grad_(true) : x_in;
  std::vector<Tensor> ins{x};
  for (auto& p : m.parameters()) ins.push_back(p);
  TensorFn f = [&m, &before](const std::vector<Tensor>& in) {
    if (before) before();
    return std::vector<Tensor>{m(in[0])};
  };
  GradcheckResult r = gradcheck(f, ins);
  INFO(m.repr() << " gradcheck: " << r.message);
  CHECK(r.ok);
  if (second) {
    GradcheckResult r2 = gradgradcheck(f, ins);
    INFO(m.repr() << " gradgradcheck: " << r2.message);
    CHECK(r2.ok);
  }
}

// Builds a model from TOML text (a [[layers]] list; type defaults to sequential) for a per-sample input.
nn::ModulePtr build_toml(const std::string& text, nn::ShapeInfo& io) {
  toml::table t = toml::parse(std::string_view(text), std::string_view("model.toml"));
  if (!t.contains("type")) t.insert("type", "sequential");
  TomlTable tt(t, "model.toml", "model");
  return nn::build_layer(tt, io);
}

std::string build_error(const std::string& text, Shape in, DType dt = DType::F32) {
  nn::ShapeInfo io{std::move(in), dt};
  return error_of([&] { build_toml(text, io); });
}

}  // namespace

// ---------------------------------------------------------------- shapes and state_dict keys

TEST_CASE("layers: output shapes", "[layers]") {
  Generator g(1);
  Tensor x = randn({2, 3, 9, 8}, {}, &g);
  CHECK(nn::Conv2d(3, 5, {3})(x).sizes() == Shape{2, 5, 7, 6});
  CHECK(nn::Conv2d(3, 6, {3, 2}, {2, 1}, {1, 0}, {1, 2}, 3)(x).sizes() == Shape{2, 6, 5, 6});
  CHECK(nn::Conv2d(3, 6, {3, 2}, {2}, {1, 0}, {1, 2}, 3)(x).sizes() == Shape{2, 6, 5, 3});          // {2} = {2, 2}
  CHECK(nn::Conv2d(3, 4, {1}, {1}, {0}, {1}, 1, false)(x.select(0, 0)).sizes() == Shape{4, 9, 8});  // unbatched
  CHECK(nn::MaxPool2d({2})(x).sizes() == Shape{2, 3, 4, 4});
  CHECK(nn::MaxPool2d({3}, {2}, {1})(x).sizes() == Shape{2, 3, 5, 4});
  CHECK(nn::MaxPool2d({2}, {1}, {0}, {2})(x.select(0, 0)).sizes() == Shape{3, 7, 6});
  CHECK(nn::AvgPool2d({2})(x).sizes() == Shape{2, 3, 4, 4});
  CHECK(nn::AvgPool2d({3}, {2}, {1}, false)(x).sizes() == Shape{2, 3, 5, 4});
  CHECK(nn::AdaptiveAvgPool2d({1})(x).sizes() == Shape{2, 3, 1, 1});
  CHECK(nn::AdaptiveAvgPool2d({4, 3})(x).sizes() == Shape{2, 3, 4, 3});
  CHECK(nn::AdaptiveAvgPool2d({5})(x.select(0, 0)).sizes() == Shape{3, 5, 5});
  CHECK(nn::BatchNorm2d(3)(x).sizes() == x.sizes());
  CHECK(nn::BatchNorm1d(3)(randn({4, 3}, {}, &g)).sizes() == Shape{4, 3});
  CHECK(nn::BatchNorm1d(3)(randn({4, 3, 7}, {}, &g)).sizes() == Shape{4, 3, 7});
  CHECK(nn::LayerNorm({8})(x).sizes() == x.sizes());
  CHECK(nn::LayerNorm({9, 8})(x).sizes() == x.sizes());
  CHECK(nn::Dropout(0.3)(x).sizes() == x.sizes());
  CHECK(nn::Embedding(10, 4)(randint(0, 10, {2, 3, 5}, DType::I64, &g)).sizes() == Shape{2, 3, 5, 4});
  CHECK(nn::Embedding(10, 4)(tensor({3}, DType::I64)).sizes() == Shape{1, 4});
  CHECK(nn::Flatten()(x).sizes() == Shape{2, 3 * 9 * 8});
  CHECK(nn::Flatten(0, 1)(x).sizes() == Shape{6, 9, 8});
  CHECK(nn::Flatten(-2)(x).sizes() == Shape{2, 3, 72});
  for (nn::ModulePtr a : std::vector<nn::ModulePtr>{
           std::make_shared<nn::ReLU>(), std::make_shared<nn::ReLU6>(), std::make_shared<nn::GELU>(),
           std::make_shared<nn::GELU>("tanh"), std::make_shared<nn::SiLU>(), std::make_shared<nn::Tanh>(),
           std::make_shared<nn::Sigmoid>(), std::make_shared<nn::Softplus>(2.0, 5.0)}) {
    INFO(a->repr());
    CHECK((*a)(x).sizes() == x.sizes());
  }
}

TEST_CASE("layers: state_dict keys and shapes are torch's", "[layers]") {
  using K = std::vector<std::string>;
  nn::Conv2d conv(4, 6, {3, 2}, {1}, {0}, {1}, 2);
  CHECK(keys_of(conv.state_dict()) == K{"weight", "bias"});
  CHECK(conv.weight.sizes() == Shape{6, 2, 3, 2});
  CHECK(conv.bias.sizes() == Shape{6});
  CHECK(keys_of(nn::Conv2d(4, 6, {3}, {1}, {0}, {1}, 1, false).state_dict()) == K{"weight"});
  nn::BatchNorm2d bn(5);
  CHECK(keys_of(bn.state_dict()) == K{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"});
  CHECK(keys_of(bn.named_parameters()) == K{"weight", "bias"});
  CHECK(bn.num_batches_tracked.dtype() == DType::I64);
  CHECK(bn.num_batches_tracked.dim() == 0);
  CHECK(bn.num_batches_tracked.item() == 0);
  CHECK(bn.running_mean.tolist() == std::vector<double>(5, 0.0));
  CHECK(bn.running_var.tolist() == std::vector<double>(5, 1.0));
  CHECK(bn.weight.tolist() == std::vector<double>(5, 1.0));
  CHECK(bn.bias.tolist() == std::vector<double>(5, 0.0));
  CHECK(keys_of(nn::BatchNorm1d(5).state_dict()) ==
        K{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"});
  CHECK(keys_of(nn::BatchNorm1d(5, 1e-5, 0.1, false).state_dict()) ==
        K{"running_mean", "running_var", "num_batches_tracked"});
  CHECK(keys_of(nn::BatchNorm1d(5, 1e-5, 0.1, true, false).state_dict()) == K{"weight", "bias"});
  nn::LayerNorm ln({3, 4});
  CHECK(keys_of(ln.state_dict()) == K{"weight", "bias"});
  CHECK(ln.weight.sizes() == Shape{3, 4});
  CHECK(keys_of(nn::LayerNorm({4}, 1e-5, false).state_dict()).empty());
  CHECK(keys_of(nn::Embedding(7, 3).state_dict()) == K{"weight"});
  for (nn::ModulePtr m : std::vector<nn::ModulePtr>{
           std::make_shared<nn::MaxPool2d>(Pair{2}), std::make_shared<nn::AvgPool2d>(Pair{2}),
           std::make_shared<nn::AdaptiveAvgPool2d>(Pair{1}), std::make_shared<nn::Dropout>(),
           std::make_shared<nn::Flatten>(), std::make_shared<nn::ReLU>(), std::make_shared<nn::ReLU6>(),
           std::make_shared<nn::GELU>(), std::make_shared<nn::SiLU>(), std::make_shared<nn::Tanh>(),
           std::make_shared<nn::Sigmoid>(), std::make_shared<nn::Softplus>()}) {
    INFO(m->repr());
    CHECK(m->state_dict().empty());
  }
}

TEST_CASE("layers: repr is torch's", "[layers]") {
  CHECK(nn::Conv2d(3, 16, {3}, {1}, {1}).repr() == "Conv2d(3, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))");
  CHECK(nn::BatchNorm2d(16).repr() ==
        "BatchNorm2d(16, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
  CHECK(nn::BatchNorm1d(4, 1e-3, std::nullopt).repr() ==
        "BatchNorm1d(4, eps=0.001, momentum=None, affine=True, track_running_stats=True)");
  CHECK(nn::LayerNorm({8}).repr() == "LayerNorm((8,), eps=1e-05, elementwise_affine=True)");
  CHECK(nn::Dropout().repr() == "Dropout(p=0.5, inplace=False)");
  CHECK(nn::Embedding(10, 3, 0).repr() == "Embedding(10, 3, padding_idx=0)");
  CHECK(nn::Softplus().repr() == "Softplus(beta=1, threshold=20)");
  CHECK(nn::Softplus(0.5, 2.5).repr() == "Softplus(beta=0.5, threshold=2.5)");
  CHECK(nn::float_repr(1e-5) == "1e-05");
  CHECK(nn::float_repr(0.1) == "0.1");
  CHECK(nn::float_repr(20.0) == "20.0");
  CHECK(nn::float_repr(1.5e20) == "1.5e+20");
  CHECK(nn::float_repr(-0.00012) == "-0.00012");
  CHECK(nn::float_repr(123456.75) == "123456.75");
}

// ---------------------------------------------------------------- default init (torch's)

TEST_CASE("layers: default initialisation follows torch", "[layers]") {
  manual_seed(11);
  nn::Conv2d conv(8, 16, {3});
  double bound = 1.0 / std::sqrt(8.0 * 9.0);  // kaiming_uniform(a = sqrt 5) on fan_in = 72
  CHECK(max(abs(conv.weight)).item() <= bound);
  CHECK(max(abs(conv.weight)).item() > 0.9 * bound);
  CHECK(max(abs(conv.bias)).item() <= bound);
  nn::Conv2d grouped(8, 16, {3}, {1}, {0}, {1}, 4);
  CHECK(max(abs(grouped.weight)).item() <= 1.0 / std::sqrt(2.0 * 9.0));
  CHECK(max(abs(grouped.weight)).item() > 0.9 / std::sqrt(8.0 * 9.0));
  nn::Embedding emb(200, 50, 3);
  CHECK(std::abs(emb.weight.mean().item()) < 0.03);
  CHECK(std::abs(emb.weight.std().item() - 1.0) < 0.03);
  CHECK(emb.weight.select(0, 3).tolist() == std::vector<double>(50, 0.0));
  CHECK(nn::Embedding(5, 2, -2).padding_idx == 3);
}

// ---------------------------------------------------------------- gradients (f64)

TEST_CASE("layers: gradcheck Conv2d", "[layers]") {
  manual_seed(2);
  nn::Conv2d a(2, 3, {2}, {1}, {1});
  check_grads(a, randn64({2, 2, 3, 3}, 1));
  nn::Conv2d b(4, 2, {2, 1}, {2, 1}, {0, 1}, {1, 2}, 2);
  check_grads(b, randn64({1, 4, 4, 3}, 2));
  nn::Conv2d c(2, 2, {2}, {1}, {0}, {1}, 1, false);
  check_grads(c, randn64({2, 3, 3}, 3), false);  // unbatched
}

TEST_CASE("layers: gradcheck pooling", "[layers]") {
  // max pooling: distinct values 0.1 apart, so no finite-difference step crosses a tie
  Tensor distinct = (randperm(2 * 2 * 5 * 5).to(DType::F64) * 0.1).reshape({2, 2, 5, 5});
  nn::MaxPool2d mp({2});
  check_grads(mp, distinct);
  nn::MaxPool2d mp2({3}, {2}, {1}, {1});
  check_grads(mp2, distinct);
  nn::AvgPool2d ap({2});
  check_grads(ap, randn64({2, 2, 5, 5}, 4));
  nn::AvgPool2d ap2({3}, {2}, {1}, false);
  check_grads(ap2, randn64({2, 2, 5, 5}, 5));
  for (Pair os : {Pair{1}, Pair{2}, Pair{3, 2}, Pair{6, 4}}) {
    nn::AdaptiveAvgPool2d aap(os);
    check_grads(aap, randn64({2, 2, 5, 4}, 6));
  }
}

TEST_CASE("layers: gradcheck BatchNorm (train and eval) and LayerNorm", "[layers]") {
  manual_seed(3);
  nn::BatchNorm2d bn(2);
  {
    NoGradGuard ng;
    bn.weight.copy_(tensor({0.7, 1.3}));
    bn.bias.copy_(tensor({0.2, -0.4}));
  }
  check_grads(bn, randn64({3, 2, 2, 2}, 7));
  bn.eval();
  check_grads(bn, randn64({3, 2, 2, 2}, 8));
  nn::BatchNorm1d bn1(3);
  check_grads(bn1, randn64({4, 3}, 9));
  check_grads(bn1, randn64({2, 3, 3}, 10));
  nn::BatchNorm1d bn_plain(3, 1e-5, 0.1, false, false);
  check_grads(bn_plain, randn64({4, 3}, 11));
  nn::LayerNorm ln({4});
  {
    NoGradGuard ng;
    ln.weight.copy_(tensor({0.5, 1.0, 1.5, 2.0}));
  }
  check_grads(ln, randn64({3, 4}, 12));
  nn::LayerNorm ln2({2, 3}, 1e-3, false);
  check_grads(ln2, randn64({2, 2, 3}, 13));
}

TEST_CASE("layers: gradcheck Dropout, Embedding, Flatten", "[layers]") {
  Generator g(5);
  nn::Dropout d(0.4, &g);
  check_grads(d, randn64({3, 5}, 14), true, [&] { g.manual_seed(5); });  // the same mask on every call
  d.eval();
  check_grads(d, randn64({3, 5}, 15));
  manual_seed(4);
  nn::Embedding e(6, 3);
  check_grads(e, tensor({{1, 0, 5}, {1, 1, 2}}, DType::I64));
  // padding_idx: the looked-up row is returned but gets no gradient (so no gradcheck, as in torch)
  nn::Embedding ep(6, 3, 1);
  {
    NoGradGuard ng;
    ep.weight.select(0, 1).fill_(0.5);
  }
  Tensor ids = tensor({{1, 0, 5}, {1, 1, 2}}, DType::I64);
  Tensor y = ep(ids);
  CHECK(y.select(0, 0).select(0, 0).tolist() == std::vector<double>(3, 0.5));
  (y * 2.0).sum().backward();
  CHECK(ep.weight.grad().select(0, 1).tolist() == std::vector<double>(3, 0.0));
  CHECK(ep.weight.grad().select(0, 0).tolist() == std::vector<double>(3, 2.0));
  CHECK(ep.weight.grad().select(0, 3).tolist() == std::vector<double>(3, 0.0));
  nn::Flatten f;
  check_grads(f, randn64({2, 2, 3}, 16));
}

TEST_CASE("layers: gradcheck activations", "[layers]") {
  Tensor x = away_from_zero(randn64({3, 5}, 17));
  nn::ReLU relu;
  check_grads(relu, x);
  nn::ReLU6 relu6;
  check_grads(relu6, tensor({-1.5, -0.3, 0.4, 2.0, 5.5, 6.7, 7.9, 3.3}, DType::F64));
  nn::GELU gelu;
  check_grads(gelu, x);
  nn::GELU gelu_tanh("tanh");
  check_grads(gelu_tanh, x);
  nn::SiLU silu;
  check_grads(silu, x);
  nn::Tanh th;
  check_grads(th, x);
  nn::Sigmoid sg;
  check_grads(sg, x);
  nn::Softplus sp;
  check_grads(sp, x);
  nn::Softplus sp2(2.0, 3.0);  // beta x crosses the threshold: values kept 0.2 away from x = 1.5
  check_grads(sp2, tensor({-2.0, -0.5, 0.3, 1.2, 1.8, 2.5}, DType::F64));
}

TEST_CASE("layers: ReLU6 and ReLU pass no gradient at their kinks (torch's hardtanh / threshold)", "[layers]") {
  Tensor x = tensor({-1.0, 0.0, 3.0, 6.0, 7.0}).requires_grad_(true);
  nn::ReLU6 r6;
  Tensor y = r6(x);
  CHECK(y.tolist() == std::vector<double>{0, 0, 3, 6, 6});
  y.sum().backward();
  CHECK(x.grad().tolist() == std::vector<double>{0, 0, 1, 0, 0});
  Tensor x2 = tensor({-1.0, 0.0, 2.0}).requires_grad_(true);
  nn::ReLU r;
  r(x2).sum().backward();
  CHECK(x2.grad().tolist() == std::vector<double>{0, 0, 1});
}

// ---------------------------------------------------------------- train vs eval

TEST_CASE("layers: Dropout scales kept values by 1/(1-p) in train and is the identity in eval", "[layers]") {
  Generator g(21);
  nn::Dropout d(0.3, &g);
  Tensor x = ones({4000}).requires_grad_(true);
  Tensor y = d(x);
  auto v = y.tolist();
  int64_t zeros_n = 0;
  for (double e : v) {
    if (e == 0.0)
      ++zeros_n;
    else
      CHECK(e == Approx(1.0 / 0.7));
  }
  CHECK(double(zeros_n) / 4000.0 == Approx(0.3).margin(0.03));
  y.sum().backward();
  CHECK(x.grad().tolist() == y.detach().tolist());  // d/dx (x * mask) = mask
  // the same seed gives the same mask
  g.manual_seed(21);
  CHECK(equal(d(x).detach(), y.detach()));
  d.eval();
  Tensor xe = tensor({1., 2., 3., 4., 5.});
  CHECK(equal(d(xe), xe));
  d.train();
  // seeds' example: p = 0.3 keeps x / 0.7
  Tensor yt = d(xe);
  for (int64_t i = 0; i < 5; ++i) {
    double e = yt.tolist()[size_t(i)];
    CHECK((e == 0.0 || e == Approx(double(i + 1) / 0.7)));
  }
  CHECK(equal(nn::Dropout(0.0)(xe), xe));
  CHECK(nn::Dropout(1.0)(xe).tolist() == std::vector<double>(5, 0.0));
  CHECK_THAT(error_of([] { nn::Dropout(1.5); }), Catch::Contains("between 0 and 1") && Catch::Contains("1.5"));
  CHECK_THAT(error_of([] { nn::Dropout(-0.1); }), Catch::Contains("between 0 and 1"));
}

TEST_CASE("layers: BatchNorm2d normalises by batch stats in train, running stats after 2 steps, eval", "[layers]") {
  nn::BatchNorm2d bn(2);
  Tensor x1 = randn64({4, 2, 3, 3}, 31, 2.0).to(DType::F32) + 1.0;
  Tensor x2 = randn64({3, 2, 2, 2}, 32, 0.5).to(DType::F32) - 2.0;
  Tensor y1 = bn(x1);
  // train output: per-channel mean 0, biased variance 1
  Tensor m = y1.mean({0, 2, 3}), v = var(y1, {0, 2, 3}, 0.0);
  for (double e : m.tolist()) CHECK(e == Approx(0.0).margin(1e-5));
  for (double e : v.tolist()) CHECK(e == Approx(1.0).epsilon(1e-3));
  bn(x2);
  CHECK(bn.num_batches_tracked.item() == 2);
  // running = 0.9 (0.9 init + 0.1 batch1) + 0.1 batch2, running_var from the unbiased variances
  Tensor rm = (0.9 * (0.1 * x1.mean({0, 2, 3})) + 0.1 * x2.mean({0, 2, 3}));
  Tensor rv = 0.9 * (0.9 + 0.1 * var(x1, {0, 2, 3}, 1.0)) + 0.1 * var(x2, {0, 2, 3}, 1.0);
  CHECK(allclose(bn.running_mean, rm, 1e-5, 1e-6));
  CHECK(allclose(bn.running_var, rv, 1e-5, 1e-6));
  CHECK_FALSE(bn.running_mean.requires_grad());
  // eval: the running statistics, nothing updated
  bn.eval();
  {
    NoGradGuard ng;
    bn.weight.copy_(tensor({2.0, 0.5}));
    bn.bias.copy_(tensor({0.1, -0.1}));
  }
  Tensor ye = bn(x2);
  Tensor want = (x2 - rm.reshape({1, 2, 1, 1})) / sqrt(rv.reshape({1, 2, 1, 1}) + 1e-5) *
                    tensor({2.0, 0.5}).reshape({1, 2, 1, 1}) +
                tensor({0.1, -0.1}).reshape({1, 2, 1, 1});
  CHECK(allclose(ye, want, 1e-5, 1e-5));
  CHECK(bn.num_batches_tracked.item() == 2);
  CHECK(allclose(bn.running_mean, rm, 1e-5, 1e-6));
  // train mode again updates; reset_running_stats restores the initial buffers
  bn.train();
  bn(x1);
  CHECK(bn.num_batches_tracked.item() == 3);
  bn.reset_running_stats();
  CHECK(bn.running_mean.tolist() == std::vector<double>(2, 0.0));
  CHECK(bn.running_var.tolist() == std::vector<double>(2, 1.0));
  CHECK(bn.num_batches_tracked.item() == 0);
}

TEST_CASE("layers: BatchNorm1d momentum none is a cumulative average, no tracking uses batch stats", "[layers]") {
  nn::BatchNorm1d bn(3, 1e-5, std::nullopt);
  Tensor x1 = randn64({5, 3}, 41).to(DType::F32), x2 = randn64({6, 3}, 42, 3.0).to(DType::F32) + 1.0;
  bn(x1);
  bn(x2);
  CHECK(allclose(bn.running_mean, (x1.mean({0}) + x2.mean({0})) / 2.0, 1e-5, 1e-6));
  CHECK(allclose(bn.running_var, (var(x1, {0}) + var(x2, {0})) / 2.0, 1e-5, 1e-6));
  nn::BatchNorm1d plain(3, 1e-5, 0.1, true, false);
  plain.eval();
  Tensor y = plain(x2);  // no running stats: batch statistics even in eval
  for (double e : y.mean({0}).tolist()) CHECK(e == Approx(0.0).margin(1e-5));
  CHECK_THAT(error_of([&] { bn(randn({1, 3})); }), Catch::Contains("more than 1 value per channel"));
  bn.eval();
  CHECK(bn(randn({1, 3})).sizes() == Shape{1, 3});  // eval accepts a batch of one
}

// ---------------------------------------------------------------- module errors

TEST_CASE("layers: forward errors name the layer and the shapes", "[layers]") {
  nn::Conv2d conv(3, 4, {3});
  CHECK_THAT(error_of([&] {
               conv(randn({2, 5, 8, 8}));
             }),
             Catch::Contains("Conv2d(3, 4") && Catch::Contains("[2, 5, 8, 8]") && Catch::Contains("[N, 3, H, W]"));
  CHECK_THAT(error_of([&] { conv(randn({3, 8})); }), Catch::Contains("[3, 8]"));
  CHECK_THAT(error_of([] { nn::Conv2d(3, 4, {3}, {1}, {0}, {1}, 2); }), Catch::Contains("divisible by groups"));
  CHECK_THAT(error_of([] { nn::Conv2d(3, 4, {0}); }), Catch::Contains("kernel_size"));
  CHECK_THAT(error_of([] { nn::MaxPool2d({2}, {}, {2}); }), Catch::Contains("at most half"));
  CHECK_THAT(error_of([] { nn::AvgPool2d({3}, {}, {2}); }), Catch::Contains("at most half"));
  CHECK_THAT(error_of([] {
               nn::MaxPool2d({2})(randn({8, 8}));
             }),
             Catch::Contains("MaxPool2d") && Catch::Contains("[8, 8]"));
  CHECK_THAT(error_of([] {
               nn::BatchNorm2d(3)(randn({2, 3, 4}));
             }),
             Catch::Contains("BatchNorm2d(3)") && Catch::Contains("expected 4D input") && Catch::Contains("[2, 3, 4]"));
  CHECK_THAT(error_of([] { nn::BatchNorm1d(3)(randn({2, 3, 4, 4})); }), Catch::Contains("expected 2D or 3D input"));
  CHECK_THAT(error_of([] { nn::BatchNorm2d(3)(randn({2, 4, 2, 2})); }), Catch::Contains("3 channels"));
  CHECK_THAT(error_of([] {
               nn::LayerNorm({4})(randn({2, 5}));
             }),
             Catch::Contains("LayerNorm((4,)") && Catch::Contains("[2, 5]"));
  CHECK_THAT(error_of([] { nn::Embedding(4, 2)(randn({3})); }),
             Catch::Contains("Embedding(4, 2)") && Catch::Contains("integer ids"));
  CHECK(error_of([] { nn::Embedding(4, 2)(tensor({4}, DType::I64)); }) != "(no error)");  // id out of range
  CHECK_THAT(error_of([] { nn::Embedding(4, 2, 4); }), Catch::Contains("padding_idx"));
  CHECK_THAT(error_of([] { nn::GELU("tan"); }), Catch::Contains("'none' or 'tanh'"));
}

// ---------------------------------------------------------------- TOML + shape inference

namespace {

// One TOML table per layer type (several for some): every registered type has at least one (the
// walk below checks it), and each is built with shape inference, run, and tied.
struct LayerTomlCase {
  std::string toml;
  Shape in;
  DType dt;
  Shape out;
};
const std::vector<LayerTomlCase>& layer_toml_cases() {
  static const std::vector<LayerTomlCase> cases = {
      {"type = 'conv2d'\nout_channels = 8\nkernel_size = 3\npadding = 1", {3, 16, 12}, DType::F32, {8, 16, 12}},
      {"type = 'conv2d'\nout_channels = 6\nkernel_size = [3, 2]\nstride = [2, 1]\ndilation = 2\ngroups = 3\n"
       "bias = false\nin_channels = 3",
       {3, 11, 9},
       DType::F32,
       {6, 4, 7}},
      {"type = 'max_pool2d'\nkernel_size = 2", {4, 9, 8}, DType::F32, {4, 4, 4}},
      {"type = 'max_pool2d'\nkernel_size = 3\nstride = 2\npadding = 1", {4, 9, 8}, DType::F32, {4, 5, 4}},
      {"type = 'avg_pool2d'\nkernel_size = [2, 3]\ncount_include_pad = false", {4, 9, 8}, DType::F32, {4, 4, 2}},
      {"type = 'adaptive_avg_pool2d'\noutput_size = 1", {4, 9, 8}, DType::F32, {4, 1, 1}},
      {"type = 'adaptive_avg_pool2d'\noutput_size = [3, 5]", {4, 9, 8}, DType::F32, {4, 3, 5}},
      {"type = 'batch_norm2d'", {4, 5, 5}, DType::F32, {4, 5, 5}},
      {"type = 'batch_norm2d'\nmomentum = 'none'\neps = 1e-3\nnum_features = 4", {4, 5, 5}, DType::F32, {4, 5, 5}},
      {"type = 'batch_norm1d'", {7}, DType::F32, {7}},
      {"type = 'batch_norm1d'\naffine = false\ntrack_running_stats = false", {7, 5}, DType::F32, {7, 5}},
      {"type = 'layer_norm'", {6, 8}, DType::F32, {6, 8}},
      {"type = 'layer_norm'\nnormalized_shape = [6, 8]\nelementwise_affine = false", {6, 8}, DType::F32, {6, 8}},
      {"type = 'dropout'\np = 0.2", {6, 8}, DType::F32, {6, 8}},
      {"type = 'embedding'\nnum_embeddings = 50\nembedding_dim = 16", {12}, DType::I64, {12, 16}},
      {"type = 'embedding'\nnum_embeddings = 50\nembedding_dim = 16\npadding_idx = 0", {12}, DType::I64, {12, 16}},
      {"type = 'flatten'", {3, 4, 5}, DType::F32, {60}},
      {"type = 'flatten'\nstart_dim = 2", {3, 4, 5}, DType::F32, {3, 20}},
      {"type = 'flatten'\nstart_dim = 1\nend_dim = -2", {3, 4, 5}, DType::F32, {12, 5}},
      {"type = 'relu'", {3, 4}, DType::F32, {3, 4}},
      {"type = 'relu6'", {3, 4}, DType::F32, {3, 4}},
      {"type = 'gelu'\napproximate = 'tanh'", {3, 4}, DType::F32, {3, 4}},
      {"type = 'silu'", {3, 4}, DType::F32, {3, 4}},
      {"type = 'tanh'", {3, 4}, DType::F32, {3, 4}},
      {"type = 'sigmoid'", {3, 4}, DType::F32, {3, 4}},
      {"type = 'softplus'\nbeta = 2\nthreshold = 10.0", {3, 4}, DType::F32, {3, 4}},
      {"type = 'linear'\nout_features = 5", {4}, DType::F32, {5}},
      {"type = 'linear'\nout_features = 3\nbias = false", {2, 4}, DType::F32, {2, 3}},
      {"type = 'position_embedding'\nblock_size = 7", {5, 4}, DType::F32, {5, 4}},
      {"type = 'token_position_embedding'\nvocab_size = 50\nn_embd = 4\nblock_size = 6", {5}, DType::I64, {5, 4}},
      {"type = 'causal_self_attention'\nn_head = 2", {5, 8}, DType::F32, {5, 8}},
      {"type = 'transformer_block'\nn_head = 2\nbias = false", {5, 8}, DType::F32, {5, 8}},
      {"type = 'sequential'\nlayers = [{type = 'linear', out_features = 3}, {type = 'relu'}]", {4}, DType::F32, {3}},
      {"type = 'residual'\nlayers = [{type = 'linear', out_features = 4}]\nactivation = 'relu'", {4}, DType::F32, {4}},
      {"type = 'repeat'\ntimes = 2\nlayer = {type = 'linear', out_features = 4}", {4}, DType::F32, {4}},
  };
  return cases;
}

std::string layer_type_of(const std::string& toml) {
  const size_t b = toml.find('\'') + 1;
  return toml.substr(b, toml.find('\'', b) - b);
}

}  // namespace

TEST_CASE("layers: every layer builds from TOML with the inferred output shape", "[layers]") {
  std::set<std::string> listed;
  for (const auto& c : layer_toml_cases()) listed.insert(layer_type_of(c.toml));
  for (const auto& type : Registry<nn::LayerType>::get().names()) {
    INFO("layer type " << type << " has no TOML case in layer_toml_cases()");
    CHECK(listed.count(type) == 1);
  }
  Generator g(7);
  for (auto& c : layer_toml_cases()) {
    INFO(c.toml);
    nn::ShapeInfo io{c.in, c.dt};
    toml::table t = toml::parse(std::string_view(c.toml), std::string_view("layer.toml"));
    nn::ModulePtr m = nn::build_layer(TomlTable(t, "layer.toml", "layer 0"), io);
    CHECK(io.shape == c.out);
    CHECK(io.dtype == DType::F32);
    // the inferred shape is the one forward gives, for a batch of 2
    Shape batched{2};
    batched.insert(batched.end(), c.in.begin(), c.in.end());
    Tensor x = c.dt == DType::I64 ? randint(0, 50, batched, DType::I64, &g) : randn(batched, {}, &g);
    Shape want{2};
    want.insert(want.end(), c.out.begin(), c.out.end());
    CHECK((*m)(x).sizes() == want);
  }
  // TOML keys reach the module
  nn::ShapeInfo io{{4, 5, 5}};
  auto bn = std::dynamic_pointer_cast<nn::BatchNorm2d>(
      build_toml("type = 'batch_norm2d'\nmomentum = 'none'\neps = 1e-3\naffine = false", io));
  REQUIRE(bn);
  CHECK_FALSE(bn->momentum.has_value());
  CHECK(bn->eps == 1e-3);
  CHECK_FALSE(bn->affine);
  nn::ShapeInfo io2{{3, 8, 8}};
  auto conv = std::dynamic_pointer_cast<nn::Conv2d>(
      build_toml("type = 'conv2d'\nout_channels = 4\nkernel_size = [3, 1]\nstride = 2\npadding = [1, 0]", io2));
  REQUIRE(conv);
  CHECK(conv->repr() == "Conv2d(3, 4, kernel_size=(3, 1), stride=(2, 2), padding=(1, 0))");
  nn::ShapeInfo io3{{5}};
  auto sp = build_toml("type = 'softplus'\nbeta = 0.5", io3);
  CHECK(sp->repr() == "Softplus(beta=0.5, threshold=20)");
}

// A model file's `tie` rebinds a parameter: forward must read what the module holds under that
// name, never a stale member (every layer type, through its TOML cases).
TEST_CASE("layers: every layer with parameters reads them through a tie (no stale member)", "[layers][tie]") {
  Generator g(3);
  for (const auto& c : layer_toml_cases()) {
    INFO(c.toml);
    toml::table t = toml::parse(std::string_view(c.toml), std::string_view("l.toml"));
    nn::ShapeInfo io{c.in, c.dt}, io2{c.in, c.dt};
    nn::ModulePtr a = nn::build_layer(TomlTable(t, "l.toml", "layer 0"), io);
    nn::ModulePtr b = nn::build_layer(TomlTable(t, "l.toml", "layer 0"), io2);
    a->eval();
    b->eval();
    // every parameter of `a` becomes a fresh tensor with other values
    for (auto& [path, mod] : a->named_modules())
      for (auto& [n, p] : mod->named_parameters(false)) {
        Tensor fresh = randn(p.sizes(), {}, &g).requires_grad_(true);
        mod->tie_parameter(n, fresh);
        CHECK(mod->tensor(n).is_same(fresh));
      }
    b->load_state_dict(a->state_dict());
    Shape batched{2};
    batched.insert(batched.end(), c.in.begin(), c.in.end());
    Tensor x = c.dt == DType::I64 ? randint(0, 5, batched, DType::I64, &g) : randn(batched, {}, &g);
    NoGradGuard ng;
    CHECK(allclose((*a)(x), (*b)(x), 0, 0));
  }
}

TEST_CASE("layers: a CNN and a token model from TOML infer their shapes end to end", "[layers]") {
  const char* cnn = R"(
[[layers]]
type = "conv2d"
out_channels = 8
kernel_size = 3
padding = 1
[[layers]]
type = "batch_norm2d"
[[layers]]
type = "relu"
[[layers]]
type = "max_pool2d"
kernel_size = 2
[[layers]]
type = "conv2d"
out_channels = 16
kernel_size = [3, 3]
stride = 2
[[layers]]
type = "adaptive_avg_pool2d"
output_size = 1
[[layers]]
type = "flatten"
[[layers]]
type = "dropout"
p = 0.1
[[layers]]
type = "linear"
out_features = 10
)";
  nn::ShapeInfo io{{3, 32, 32}};
  manual_seed(9);
  nn::ModulePtr m = build_toml(cnn, io);
  CHECK(io.shape == Shape{10});
  CHECK(keys_of(m->state_dict()) == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias",
                                                             "1.running_mean", "1.running_var", "1.num_batches_tracked",
                                                             "4.weight", "4.bias", "8.weight", "8.bias"});
  Tensor y = (*m)(randn({2, 3, 32, 32}));
  CHECK(y.sizes() == Shape{2, 10});
  y.sum().backward();
  for (auto& [n, p] : m->named_parameters()) {
    INFO(n);
    CHECK(p.grad().defined());
  }
  m->eval();
  CHECK((*m)(randn({1, 3, 32, 32})).sizes() == Shape{1, 10});

  const char* tokens = R"(
[[layers]]
type = "embedding"
num_embeddings = 100
embedding_dim = 32
[[layers]]
type = "layer_norm"
[[layers]]
type = "gelu"
[[layers]]
type = "linear"
out_features = 100
)";
  nn::ShapeInfo tio{{12}, DType::I64};
  nn::ModulePtr lm = build_toml(tokens, tio);
  CHECK(tio.shape == Shape{12, 100});
  CHECK(tio.dtype == DType::F32);
  CHECK((*lm)(randint(0, 100, {3, 12})).sizes() == Shape{3, 12, 100});
}

TEST_CASE("layers: TOML errors name the layer, the key and the shapes", "[layers]") {
  // a misspelt key: the nearest known key is suggested
  CHECK_THAT(build_error("[[layers]]\ntype = 'conv2d'\nout_channels = 4\nkernel_size = 3\nstrid = 2", {3, 8, 8}),
             Catch::Contains("unknown key 'strid'") && Catch::Contains("layer 0 (conv2d)") &&
                 Catch::Contains("did you mean 'stride'?") && Catch::Contains("model.toml:5"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'max_pool2d'\nkernel = 2", {3, 8, 8}),
             Catch::Contains("missing required key 'kernel_size'"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'batch_norm2d'\nmomentun = 0.2", {3, 8, 8}),
             Catch::Contains("did you mean 'momentum'?"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'gelu'\napproximate = 'tan'", {3}),
             Catch::Contains("did you mean 'tanh'?"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'conv2'", {3, 8, 8}), Catch::Contains("did you mean 'conv2d'?"));
  // wrong input rank: the layer and the shape it was given
  CHECK_THAT(build_error("[[layers]]\ntype = 'flatten'\n[[layers]]\ntype = 'conv2d'\nout_channels = 4\nkernel_size = 3",
                         {3, 8, 8}),
             Catch::Contains("layer 1 (conv2d)") && Catch::Contains("[C, H, W]") && Catch::Contains("[192]"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'batch_norm2d'", {16}),
             Catch::Contains("[C, H, W]") && Catch::Contains("[16]"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'batch_norm1d'", {3, 4, 4}),
             Catch::Contains("[C] or [C, L]") && Catch::Contains("[3, 4, 4]"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'max_pool2d'\nkernel_size = 2", {8, 8}), Catch::Contains("[8, 8]"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'adaptive_avg_pool2d'\noutput_size = 2", {8}), Catch::Contains("[8]"));
  // an empty output: both shapes
  CHECK_THAT(build_error("[[layers]]\ntype = 'conv2d'\nout_channels = 4\nkernel_size = 5", {3, 4, 6}),
             Catch::Contains("layer 0 (conv2d)") && Catch::Contains("[3, 4, 6]") && Catch::Contains("[4, 0, 2]") &&
                 Catch::Contains("empty output"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'max_pool2d'\nkernel_size = 3\nstride = 1", {3, 2, 6}),
             Catch::Contains("[3, 2, 6]") && Catch::Contains("empty output"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'conv2d'\nin_channels = 4\nout_channels = 4\nkernel_size = 1", {3, 4, 4}),
             Catch::Contains("in_channels = 4 does not match") && Catch::Contains("[3, 4, 4]"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'conv2d'\nout_channels = 4\nkernel_size = 1\ngroups = 2", {3, 4, 4}),
             Catch::Contains("'groups'") && Catch::Contains("must divide"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'batch_norm2d'\nnum_features = 5", {3, 4, 4}),
             Catch::Contains("num_features = 5 does not match"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'batch_norm2d'\nmomentum = 'fast'", {3, 4, 4}),
             Catch::Contains("'momentum'") && Catch::Contains("\"none\""));
  CHECK_THAT(build_error("[[layers]]\ntype = 'max_pool2d'\nkernel_size = 2\npadding = 2", {3, 8, 8}),
             Catch::Contains("'padding'") && Catch::Contains("at most half"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'dropout'\np = 1.5", {8}),
             Catch::Contains("'p'") && Catch::Contains("between 0 and 1"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'layer_norm'\nnormalized_shape = [4]", {3, 5}),
             Catch::Contains("normalized_shape") && Catch::Contains("[3, 5]"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'embedding'\nnum_embeddings = 10\nembedding_dim = 4", {12}),
             Catch::Contains("int64") && Catch::Contains("[12]"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'relu'", {12}, DType::I64), Catch::Contains("floating point"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'flatten'\nstart_dim = 0", {3, 4}), Catch::Contains("batch dim"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'flatten'\nstart_dim = 3", {3, 4}), Catch::Contains("out of range"));
  CHECK_THAT(build_error("[[layers]]\ntype = 'conv2d'\nout_channels = 4\nkernel_size = [3, 3, 3]", {3, 8, 8}),
             Catch::Contains("'kernel_size'") && Catch::Contains("list of two integers"));
}

namespace {

// "BatchNorm2d", "batch_norm2d", "TOML residual": lower case without underscores, to match a
// registry name with torch's class name.
std::string folded(const std::string& s) {
  std::string r;
  for (char c : s)
    if (c != '_') r += char(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

}  // namespace

TEST_CASE("layers: every registered layer type has a doc line and a test of its numbers", "[layers]") {
  // numbers against torch: layer_fixtures.json's classes; otherwise a [layers] test case that names
  // the layer (its class or its type). A type registered without either fails here, by name.
  std::set<std::string> fixture_classes;
  for (const auto& c : fixture_json("layer_fixtures.json"))
    fixture_classes.insert(folded(c.at("layer").get<std::string>()));
  std::vector<std::string> layer_tests;
  for (const auto& tc : Catch::getRegistryHub().getTestCaseRegistry().getAllTests())
    if (std::find(tc.tags.begin(), tc.tags.end(), "layers") != tc.tags.end()) layer_tests.push_back(folded(tc.name));
  const auto& registry = Registry<nn::LayerType>::get();
  REQUIRE(registry.names().size() >= 25);
  for (const auto& type : registry.names()) {
    INFO("layer type " << type);
    CHECK_FALSE(registry.all().at(type).doc.empty());
    const std::string t = folded(type);
    const bool tested = fixture_classes.count(t) > 0 ||
                        std::any_of(layer_tests.begin(), layer_tests.end(),
                                    [&](const std::string& name) { return name.find(t) != std::string::npos; });
    CHECK(tested);
  }
}

// ---------------------------------------------------------------- PyTorch fixtures

namespace {

Tensor decode(const json& t) {
  return from_vector(t.at("values").get<std::vector<double>>(), t.at("shape").get<Shape>(),
                     dtype_from_name(t.at("dtype").get<std::string>()));
}

nn::StateDict decode_named(const json& items) {
  nn::StateDict sd;
  for (auto& kv : items) sd.emplace_back(kv.at(0).get<std::string>(), decode(kv.at(1)));
  return sd;
}

std::string shape_str(const Shape& s) { return str(s); }

// Empty when got matches want (shape, dtype, |got - want| <= atol + rtol |want|); else what differs.
std::string compare(const Tensor& got, const json& want, double rtol, double atol) {
  Shape ws = want.at("shape").get<Shape>();
  std::string wd = want.at("dtype").get<std::string>();
  if (!got.defined()) return "ours is undefined, torch has shape " + shape_str(ws);
  if (got.sizes() != ws) return "shape: ours " + shape_str(got.sizes()) + " vs torch " + shape_str(ws);
  if (wd != dtype_name(got.dtype())) return std::string("dtype: ours ") + dtype_name(got.dtype()) + " vs torch " + wd;
  std::vector<double> g = got.tolist(), w = want.at("values").get<std::vector<double>>();
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - w[i]) <= atol + rtol * std::abs(w[i])) && bad++ == 0) first = int64_t(i);
  if (bad == 0) return "";
  std::ostringstream o;
  o.precision(10);
  o << bad << " of " << g.size() << " elements differ; first at flat " << first << ": ours " << g[size_t(first)]
    << " vs torch " << w[size_t(first)];
  return o.str();
}

Pair pair(const json& a, const char* k, Pair dflt) { return a.contains(k) ? a.at(k).get<Pair>() : dflt; }

// Our module for a fixture's layer + args (the args follow our constructors).
nn::ModulePtr make_layer(const std::string& layer, const json& a) {
  auto f = [&](const char* k, double d) { return a.contains(k) ? a.at(k).get<double>() : d; };
  auto b = [&](const char* k, bool d) { return a.contains(k) ? a.at(k).get<bool>() : d; };
  auto i = [&](const char* k, int64_t d) { return a.contains(k) ? a.at(k).get<int64_t>() : d; };
  if (layer == "Conv2d")
    return std::make_shared<nn::Conv2d>(i("in", 0), i("out", 0), pair(a, "kernel", {}), pair(a, "stride", {1}),
                                        pair(a, "padding", {0}), pair(a, "dilation", {1}), i("groups", 1),
                                        b("bias", true));
  if (layer == "MaxPool2d")
    return std::make_shared<nn::MaxPool2d>(pair(a, "kernel", {}), pair(a, "stride", {}), pair(a, "padding", {0}),
                                           pair(a, "dilation", {1}));
  if (layer == "AvgPool2d")
    return std::make_shared<nn::AvgPool2d>(pair(a, "kernel", {}), pair(a, "stride", {}), pair(a, "padding", {0}),
                                           b("count_include_pad", true));
  if (layer == "AdaptiveAvgPool2d") return std::make_shared<nn::AdaptiveAvgPool2d>(pair(a, "output_size", {}));
  if (layer == "BatchNorm1d" || layer == "BatchNorm2d") {
    std::optional<double> m = 0.1;
    if (a.contains("momentum")) m = a.at("momentum").is_null() ? std::nullopt : std::optional<double>(f("momentum", 0));
    int64_t c = i("num_features", 0);
    double eps = f("eps", 1e-5);
    bool aff = b("affine", true), track = b("track_running_stats", true);
    if (layer == "BatchNorm1d") return std::make_shared<nn::BatchNorm1d>(c, eps, m, aff, track);
    return std::make_shared<nn::BatchNorm2d>(c, eps, m, aff, track);
  }
  if (layer == "LayerNorm")
    return std::make_shared<nn::LayerNorm>(a.at("normalized_shape").get<Shape>(), f("eps", 1e-5),
                                           b("elementwise_affine", true));
  if (layer == "Dropout") return std::make_shared<nn::Dropout>(f("p", 0.5));
  if (layer == "Embedding") {
    std::optional<int64_t> pad;
    if (a.contains("padding_idx")) pad = i("padding_idx", 0);
    return std::make_shared<nn::Embedding>(i("num_embeddings", 0), i("embedding_dim", 0), pad);
  }
  if (layer == "Flatten") return std::make_shared<nn::Flatten>(i("start_dim", 1), i("end_dim", -1));
  if (layer == "ReLU") return std::make_shared<nn::ReLU>();
  if (layer == "ReLU6") return std::make_shared<nn::ReLU6>();
  if (layer == "GELU") return std::make_shared<nn::GELU>(a.value("approximate", "none"));
  if (layer == "SiLU") return std::make_shared<nn::SiLU>();
  if (layer == "Tanh") return std::make_shared<nn::Tanh>();
  if (layer == "Sigmoid") return std::make_shared<nn::Sigmoid>();
  if (layer == "Softplus") return std::make_shared<nn::Softplus>(f("beta", 1.0), f("threshold", 20.0));
  throw std::runtime_error("layer_fixtures.json: unknown layer " + layer);
}

}  // namespace

TEST_CASE("layers: outputs, gradients and running stats equal PyTorch's (layer_fixtures.json)", "[layers][torch]") {
  const json& cases = fixture_json("layer_fixtures.json");
  REQUIRE(cases.size() >= 40);
  std::set<std::string> layers_seen;
  for (auto& c : cases) {
    std::string name = c.at("name").get<std::string>();
    INFO("case " << name);
    double rtol = c.at("rtol").get<double>(), atol = c.at("atol").get<double>();
    nn::ModulePtr m = make_layer(c.at("layer").get<std::string>(), c.at("args"));
    layers_seen.insert(c.at("layer").get<std::string>());
    CHECK(m->repr() == c.at("repr").get<std::string>());
    nn::StateDict sd = decode_named(c.at("state_dict"));
    CHECK(keys_of(m->state_dict()) == keys_of(sd));  // torch's keys, in torch's order
    m->load_state_dict(sd);
    m->train(c.at("mode").get<std::string>() == "train");
    const json& inputs = c.at("inputs");
    for (size_t k = 0; k + 1 < inputs.size(); ++k) {
      NoGradGuard ng;
      (*m)(decode(inputs[k]));
    }
    Tensor x = decode(inputs.back());
    if (x.is_floating_point()) x.requires_grad_(true);
    Tensor y = (*m)(x);
    CHECK(compare(y, c.at("output"), rtol, atol) == "");
    (y * decode(c.at("grad_weight"))).sum().backward();
    if (!c.at("input_grad").is_null()) CHECK(compare(x.grad(), c.at("input_grad"), rtol, atol) == "");
    nn::NamedTensors params = m->named_parameters();
    for (auto& [k, g] : c.at("param_grads").items()) {
      std::string pname = g.at(0).get<std::string>();
      INFO("grad of " << pname);
      auto it = std::find_if(params.begin(), params.end(), [&](auto& p) { return p.first == pname; });
      REQUIRE(it != params.end());
      CHECK(compare(it->second.grad(), g.at(1), rtol, atol) == "");
    }
    nn::StateDict after = m->state_dict();
    const json& want_after = c.at("state_after");
    REQUIRE(after.size() == want_after.size());
    for (size_t k = 0; k < after.size(); ++k) {
      INFO("state_dict after: " << after[k].first);
      CHECK(after[k].first == want_after[k].at(0).get<std::string>());
      CHECK(compare(after[k].second, want_after[k].at(1), rtol, atol) == "");
    }
  }
  CHECK(layers_seen.size() == 17);
}

}  // namespace test_layers
