// Autocast: each op's policy (low precision for matmul-like ops, f32 for softmax, losses, norms,
// reductions and exp/log, promotion for multi-input ops), the parameter cast cache, f32 master
// gradients, and a small network against torch 1.13's CPU autocast (tests/fixtures/
// autocast_fixtures.json, written by generators/make_autocast_fixtures.py).
#include <catch2/catch.hpp>
#include "unit/fixtures.h"
#include <fstream>
#include <nlohmann/json.hpp>
#include "ops/autocast.h"
#include "autograd/engine.h"
#include "core/grad_mode.h"
#include "ops/ops.h"

namespace test_autocast {

using namespace tr;
using json = nlohmann::json;

namespace {

const json& fixtures() { return fixture_json("autocast_fixtures.json"); }

Tensor fx(const json& v, const Shape& s, bool grad = false) {
  Tensor t = from_vector(v.get<std::vector<double>>(), s, DType::F32);
  if (grad) t.requires_grad_(true);
  return t;
}

void check_close(const Tensor& got, const json& want, double rtol, double atol) {
  std::vector<double> g = got.to(DType::F64).contiguous().tolist(), w = want.get<std::vector<double>>();
  REQUIRE(g.size() == w.size());
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - w[i]) - rtol * std::abs(w[i]));
  INFO("worst excess over rtol: " << worst);
  CHECK(worst <= atol);
}

}  // namespace

TEST_CASE("autocast: each op family's output dtype (CPU, bfloat16)", "[amp][autocast]") {
  Tensor a = randn({4, 8}), b = randn({8, 3}), w = randn({5, 8});
  Tensor img = randn({2, 3, 6, 6}), k = randn({4, 3, 3, 3});
  CHECK(mm(a, b).dtype() == DType::F32);  // off outside the scope
  {
    amp::AutocastGuard ac(DeviceType::CPU, DType::BF16);
    CHECK(amp::is_autocast_enabled(DeviceType::CPU));
    CHECK_FALSE(amp::is_autocast_enabled(DeviceType::CUDA));
    Tensor h = mm(a, b);
    CHECK(h.dtype() == DType::BF16);
    CHECK(matmul(a.unsqueeze(0), b.unsqueeze(0)).dtype() == DType::BF16);  // bmm
    CHECK(linear(a, w, randn({5})).dtype() == DType::BF16);
    CHECK(conv2d(img, k, randn({4}), {1, 1}, {1, 1}).dtype() == DType::BF16);
    CHECK(relu(h).dtype() == DType::BF16);       // not on a list: runs in its input's dtype
    CHECK(softmax(h, 1).dtype() == DType::F32);  // f32 list
    CHECK(log_softmax(h, 1).dtype() == DType::F32);
    CHECK(sum(h).dtype() == DType::F32);
    CHECK(exp(h).dtype() == DType::F32);
    CHECK(log(relu(h) + 1.0).dtype() == DType::F32);
    CHECK(layer_norm(h, {3}).dtype() == DType::F32);
    Tensor c = conv2d(img, k, Tensor(), {1, 1}, {1, 1});  // bf16 [2, 4, 6, 6]
    CHECK(batch_norm(c, zeros({4}), ones({4}), ones({4}), zeros({4}), true).output.dtype() == DType::F32);
    CHECK(cross_entropy(h, tensor({0, 1, 2, 0}, DType::I64)).dtype() == DType::F32);
    CHECK(mse_loss(h, zeros({4, 3}), "mean").dtype() == DType::F32);
    CHECK((h + ones({4, 3})).dtype() == DType::F32);  // bf16 + f32 promotes
    CHECK(cat({h, ones({4, 3})}, 1).dtype() == DType::F32);
    CHECK(mm(a.to(DType::F64), b.to(DType::F64)).dtype() == DType::F64);  // f64 is never cast
    {
      amp::AutocastGuard off(DeviceType::CPU, DType::BF16, false);  // autocast(enabled=False) inside
      CHECK(mm(a, b).dtype() == DType::F32);
    }
    CHECK(mm(a, b).dtype() == DType::BF16);
  }
  CHECK_FALSE(amp::is_autocast_enabled(DeviceType::CPU));
  {
    amp::AutocastGuard ac(DeviceType::CPU, DType::F16);  // fp16 on the CPU: computed with f32 accumulation
    Tensor h = mm(a, b);
    CHECK(h.dtype() == DType::F16);
    NoGradGuard ng;
    Tensor ref = mm(a.to(DType::F16).to(DType::F32), b.to(DType::F16).to(DType::F32));
    CHECK(allclose(h.to(DType::F32), ref, 1e-3, 1e-3));
  }
  CHECK_THROWS_WITH(amp::AutocastGuard(DeviceType::CPU, DType::F32), Catch::Contains("bfloat16 or float16"));
}

TEST_CASE("autocast: a parameter is cast once per region, gradients stay f32", "[amp][autocast]") {
  Tensor w = randn({5, 8}).requires_grad_(true), x = randn({4, 8});
  Tensor y;
  {
    amp::AutocastGuard ac(DeviceType::CPU, DType::BF16);
    Tensor h = linear(x, w);
    CHECK(amp::autocast_cache_size() == 1);
    Tensor h2 = linear(x * 2.0, w);  // the cached cast of w is reused
    CHECK(amp::autocast_cache_size() == 1);
    Tensor nonleaf = w * 1.0;  // not a leaf: not cached
    (void)linear(x, nonleaf);
    CHECK(amp::autocast_cache_size() == 1);
    {
      NoGradGuard ng;  // without grad mode nothing is cached (torch: the cache serves autograd)
      (void)linear(x, randn({5, 8}).requires_grad_(true));
      CHECK(amp::autocast_cache_size() == 1);
    }
    y = sum(h) + sum(h2);
  }
  CHECK(amp::autocast_cache_size() == 0);  // cleared when the outermost region ends
  CHECK(y.dtype() == DType::F32);
  y.backward();
  REQUIRE(w.grad().defined());
  CHECK(w.grad().dtype() == DType::F32);
  // d/dw sum(x w^T) + sum(2x w^T) = 3 * column sums of x, in every row (x in bf16 for the forward)
  NoGradGuard ng;
  Tensor xs = sum(x.to(DType::BF16).to(DType::F32), {0}) * 3.0;
  CHECK(allclose(w.grad(), xs.unsqueeze(0).expand({5, 8}), 2e-2, 2e-2));
}

TEST_CASE("autocast: a small network equals torch 1.13's CPU autocast (bfloat16)", "[amp][autocast]") {
  const json& f = fixtures();
  const json& P = f.at("params");
  Tensor x = fx(f.at("x"), {6, 8}), y = from_vector(f.at("y").get<std::vector<double>>(), {6}, DType::I64);
  Tensor w1 = fx(P.at("w1"), {16, 8}, true), b1 = fx(P.at("b1"), {16}, true);
  Tensor w2 = fx(P.at("w2"), {12, 16}, true), b2 = fx(P.at("b2"), {12}, true);
  Tensor g = fx(P.at("g"), {12}, true), beta = fx(P.at("beta"), {12}, true), w3 = fx(P.at("w3"), {4, 12}, true);
  Tensor logits, loss, h1, h2, n2, conv;
  {
    amp::AutocastGuard ac(DeviceType::CPU, DType::BF16);
    h1 = linear(x, w1, b1);
    h2 = linear(relu(h1), w2, b2);
    n2 = layer_norm(h2, {12}, g, beta);
    logits = linear(n2, w3);
    loss = cross_entropy(logits, y);
    conv = conv2d(fx(f.at("img"), {2, 3, 7, 7}), fx(f.at("cw"), {5, 3, 3, 3}), fx(f.at("cb"), {5}), {1, 1}, {1, 1});
  }
  const json& dt = f.at("dtypes");
  CHECK(dtype_name(h1.dtype()) == dt.at("h1").get<std::string>());
  CHECK(dtype_name(h2.dtype()) == dt.at("h2").get<std::string>());
  CHECK(dtype_name(n2.dtype()) == dt.at("n2").get<std::string>());
  CHECK(dtype_name(logits.dtype()) == dt.at("logits").get<std::string>());
  CHECK(dtype_name(loss.dtype()) == dt.at("loss").get<std::string>());
  CHECK(dtype_name(conv.dtype()) == dt.at("conv").get<std::string>());
  // bf16 has 8 significant bits: values agree to a few bf16 ulps (accumulation order differs)
  check_close(logits, f.at("logits"), 2e-2, 2e-2);
  CHECK(loss.item() == Approx(f.at("loss").get<double>()).epsilon(1e-2));
  check_close(conv, f.at("conv"), 2e-2, 2e-2);
  loss.backward();
  for (auto [name, p] : std::vector<std::pair<std::string, Tensor>>{
           {"w1", w1}, {"b1", b1}, {"w2", w2}, {"b2", b2}, {"g", g}, {"beta", beta}, {"w3", w3}}) {
    INFO(name);
    REQUIRE(p.grad().defined());
    CHECK(p.grad().dtype() == DType::F32);
    check_close(p.grad(), f.at("grads").at(name), 5e-2, 1e-2);
  }
}

}  // namespace test_autocast
