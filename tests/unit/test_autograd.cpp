// Autograd engine: the seeds' worked examples, hooks, retain_grad, no_grad, anomaly mode,
// in-place checks, double backward, and a 100k-node chain.
#include <catch2/catch.hpp>
#include <chrono>
#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/gradcheck.h"
#include "autograd/anomaly_mode.h"
#include "core/grad_mode.h"
#include "autograd/node.h"
#include "ops/ops.h"

namespace test_autograd {

using namespace tr;
using Catch::Matchers::Contains;

namespace {
std::vector<double> vals(const Tensor& t) { return t.tolist(); }
Tensor leaf(std::initializer_list<double> v, DType dt = DType::F32) { return tensor(v, dt).requires_grad_(true); }
}  // namespace

TEST_CASE("seeds: autograd.grad of v = x + 2, y = v ** 2", "[autograd]") {
  Tensor x = leaf({1, 2, 3});
  Tensor v = x + 2.0;
  Tensor y = pow(v, 2.0);
  Tensor dy_dx = autograd::grad({y}, {x}, {ones_like(y)}, true)[0];
  CHECK(vals(dy_dx) == std::vector<double>{6, 8, 10});
  Tensor dv_dx = autograd::grad({v}, {x}, {ones_like(v)})[0];
  CHECK(vals(dv_dx) == std::vector<double>{1, 1, 1});
  CHECK_FALSE(x.grad().defined());  // grad() does not accumulate
  // y.backward(ones_like(y)) gives the same and does accumulate
  Tensor y2 = pow(x + 2.0, 2.0);
  y2.backward(ones_like(y2));
  CHECK(vals(x.grad()) == std::vector<double>{6, 8, 10});
}

TEST_CASE("seeds: gradient penalty with create_graph", "[autograd]") {
  // loss = (w . x - t)^2; g = dloss/dw = 2 r x with r = w . x - t; total = loss + ||g||
  // d total / dw = 2 r x + d(2 |r| ||x||)/dw = 2 r x + 2 sign(r) ||x|| x
  Tensor w = leaf({0.5, -1.0, 2.0}, DType::F64);
  Tensor x = tensor({1.0, 2.0, 3.0}, DType::F64);
  double t = 1.0;
  Tensor loss = pow(sum(w * x) - t, 2.0);
  auto grads = autograd::grad({loss}, {w}, {}, std::nullopt, /*create_graph=*/true);
  CHECK_FALSE(w.grad().defined());
  Tensor grad_norm = sqrt(sum(pow(grads[0], 2.0)));
  Tensor total = loss + grad_norm;
  total.backward();
  double r = 0.5 * 1 - 1.0 * 2 + 2.0 * 3 - t;  // 3.5
  double xn = std::sqrt(14.0);
  auto g = vals(w.grad());
  for (int i = 0; i < 3; ++i) CHECK(g[i] == Approx(2 * r * (i + 1.0) + 2 * xn * (i + 1.0)).epsilon(1e-12));
}

namespace {
// The seeds' Square: forward x**2, backward grad_out * 2 * x (differentiable, so double backward works).
struct Square {
  static std::vector<Tensor> forward(autograd::FunctionCtx& ctx, const std::vector<Tensor>& in) {
    ctx.save_for_backward({in[0]});
    return {pow(in[0], 2.0)};
  }
  static std::vector<Tensor> backward(autograd::FunctionCtx& ctx, const std::vector<Tensor>& g) {
    Tensor x = ctx.saved_tensors()[0];
    return {g[0] * 2.0 * x};
  }
};
}  // namespace

TEST_CASE("seeds: custom Square function passes gradcheck and gradgradcheck", "[autograd]") {
  Generator gen(3);
  Tensor x = rand({3, 3}, DType::F64, &gen).requires_grad_(true);
  TensorFn f = [](const std::vector<Tensor>& in) { return autograd::Function<Square>::apply(in, "Square"); };
  auto r1 = gradcheck(f, {x});
  INFO(r1.message);
  CHECK(r1.ok);
  auto r2 = gradgradcheck(f, {x});
  INFO(r2.message);
  CHECK(r2.ok);
  Tensor y = f({x})[0];
  CHECK(y.grad_fn()->name() == "SquareBackward");
}

TEST_CASE("double backward: d2/dx2 x^3 = 6x", "[autograd]") {
  Tensor x = leaf({1.0, -2.0}, DType::F64);
  Tensor y = sum(pow(x, 3.0));
  Tensor g = autograd::grad({y}, {x}, {}, std::nullopt, true)[0];
  CHECK(vals(g) == std::vector<double>{3, 12});
  Tensor gg = autograd::grad({sum(g)}, {x})[0];
  CHECK(vals(gg) == std::vector<double>{6, -12});
}

TEST_CASE("leaf gradients accumulate across backward calls, zero_grad", "[autograd]") {
  Tensor x = leaf({1, 2});
  sum(x * 3.0).backward();
  sum(x * 3.0).backward();
  CHECK(vals(x.grad()) == std::vector<double>{6, 6});
  x.zero_grad(false);
  CHECK(vals(x.grad()) == std::vector<double>{0, 0});
  x.zero_grad(true);
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("retain_grad keeps the gradient of a non-leaf", "[autograd]") {
  Tensor a = leaf({1, 2});
  Tensor b = a * 2.0;
  b.retain_grad();
  Tensor c = sum(b * b);
  c.backward();
  CHECK(vals(b.grad()) == std::vector<double>{4, 8});
  CHECK(vals(a.grad()) == std::vector<double>{8, 16});
  Tensor d = a * 3.0;
  CHECK_FALSE(d.grad().defined());
}

TEST_CASE("tensor hooks can replace the gradient and be removed", "[autograd]") {
  Tensor x = leaf({1, 2, 3});
  Tensor y = x * 2.0;
  int calls = 0;
  int h = y.register_hook([&](const Tensor& g) {
    ++calls;
    return g * 10.0;
  });
  sum(y).backward(Tensor(), true);
  CHECK(calls == 1);
  CHECK(vals(x.grad()) == std::vector<double>{20, 20, 20});
  y.remove_hook(h);
  x.zero_grad();
  sum(y).backward();
  CHECK(calls == 1);
  CHECK(vals(x.grad()) == std::vector<double>{2, 2, 2});
  // hooks on leaves see the gradient before accumulation
  Tensor z = leaf({1});
  z.register_hook([](const Tensor& g) { return g + 1.0; });
  sum(z * 5.0).backward();
  CHECK(z.grad().item() == 6.0);
}

TEST_CASE("no_grad records nothing, detach shares storage", "[autograd]") {
  Tensor x = leaf({1, 2});
  {
    NoGradGuard ng;
    Tensor y = x * 2.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.is_leaf());
  }
  CHECK((x * 2.0).requires_grad());
  Tensor d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.storage() == x.storage());
}

TEST_CASE("backward through a freed graph is an error, retain_graph allows it", "[autograd]") {
  Tensor x = leaf({1, 2});
  Tensor y = sum(x * x);
  y.backward(Tensor(), true);
  y.backward();
  CHECK(vals(x.grad()) == std::vector<double>{4, 8});
  CHECK_THROWS_WITH(y.backward(), Contains("backward through the graph a second time"));
}

TEST_CASE("misuse: backward of a non-scalar without grad_outputs names the shape", "[autograd][errors]") {
  Tensor x = leaf({1, 2});
  Tensor y = x * 2.0;
  CHECK_THROWS_WITH(y.backward(), Contains("only for scalar outputs") && Contains("[2]"));
  Tensor c = tensor({1.0});
  CHECK_THROWS_WITH(sum(c).backward(), Contains("does not require grad"));
}

TEST_CASE("misuse: backward through a tensor modified in place after it was saved", "[autograd][errors]") {
  Tensor x = leaf({1, 2, 3});
  Tensor a = x * 1.0;
  Tensor y = a * a;  // saves a
  a.add_(1.0);       // modifies a saved tensor
  CHECK(a.version() == 1);
  CHECK_THROWS_WITH(sum(y).backward(),
                    Contains("modified by an inplace operation") && Contains("MulBackward0") && Contains("version 1"));
}

TEST_CASE("in-place ops: leaf error, history rebased on non-leaves", "[autograd]") {
  Tensor x = leaf({1, 2, 3});
  CHECK_THROWS_WITH(x.add_(1.0), Contains("leaf Variable that requires grad"));
  {
    NoGradGuard ng;
    x.add_(1.0);  // allowed under no_grad (optimizer updates)
  }
  CHECK(vals(x) == std::vector<double>{2, 3, 4});
  Tensor w = leaf({2, 2, 2});
  Tensor a = x * 1.0;
  a.mul_(w);  // a = x * w, saved operands stay intact
  sum(a).backward();
  CHECK(vals(x.grad()) == std::vector<double>{2, 2, 2});
  CHECK(vals(w.grad()) == std::vector<double>{2, 3, 4});
}

TEST_CASE("grad: unused inputs need allow_unused", "[autograd]") {
  Tensor x = leaf({1}), z = leaf({2});
  Tensor y = x * 2.0;
  CHECK_THROWS_WITH(autograd::grad({y.sum()}, {x, z}, {}, true), Contains("allow_unused"));
  auto g = autograd::grad({y.sum()}, {x, z}, {}, true, false, true);
  CHECK(g[0].item() == 2.0);
  CHECK_FALSE(g[1].defined());
}

TEST_CASE("grad w.r.t. an intermediate tensor", "[autograd]") {
  Tensor x = leaf({1, 2});
  Tensor h = x * 3.0;
  Tensor y = sum(h * h);
  auto g = autograd::grad({y}, {h, x});
  CHECK(vals(g[0]) == std::vector<double>{6, 12});
  CHECK(vals(g[1]) == std::vector<double>{18, 36});
}

TEST_CASE("anomaly mode names the backward op that produced NaN", "[autograd][errors]") {
  Tensor x = tensor({0.0, 1.0}).requires_grad_(true);
  Tensor y = sum(sqrt(x) * 0.0);
  {
    DetectAnomalyGuard guard;
    CHECK_THROWS_WITH(y.backward(Tensor(), true), Contains("SqrtBackward0") && Contains("nan"));
  }
  y.backward();  // outside anomaly mode NaN propagates silently, as in torch
  CHECK(std::isnan(x.grad().tolist()[0]));
}

TEST_CASE("gradient dtype follows the input through cast", "[autograd]") {
  Tensor x = leaf({1.5, 2.5});  // f32
  Tensor y = cast(x, DType::F64) * 2.0;
  sum(y).backward();
  CHECK(x.grad().dtype() == DType::F32);
  CHECK(vals(x.grad()) == std::vector<double>{2, 2});
}

namespace {

// Seconds to build an n-node chain, run backward through it, and free it and a second,
// never-backpropagated chain (whose destruction alone walks it).
double chain_seconds(int n) {
  auto t0 = std::chrono::steady_clock::now();
  Tensor x = leaf({1.0}, DType::F64);
  {
    Tensor y = x;
    for (int i = 0; i < n; ++i) y = y * 1.0;
    y.sum().backward();
  }
  CHECK(x.grad().item() == 1.0);
  {
    Tensor y = x;
    for (int i = 0; i < n; ++i) y = y + 0.0;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// Without recursion (no stack overflow) and in linear time: ten times the nodes cost about ten
// times as long (a quadratic walk would cost a hundred), whatever the machine or sanitizer.
TEST_CASE("a 100k-node chain runs backward and is freed without recursion", "[autograd]") {
  const double small = chain_seconds(10000), large = chain_seconds(100000);
  INFO("10k nodes: " << small << " s, 100k nodes: " << large << " s");
  CHECK(large < 40 * small + 0.5);
}

TEST_CASE("seeds: std and var are unbiased by default", "[autograd][reduce]") {
  Tensor x = tensor({1.0, 2.0, 3.0, 4.0}, DType::F64);
  CHECK(var(x).item() == Approx(5.0 / 3.0).epsilon(1e-15));
  CHECK(var(x, {}, 0.0).item() == Approx(1.25).epsilon(1e-15));
  CHECK(tr::std(x).item() == Approx(std::sqrt(5.0 / 3.0)).epsilon(1e-15));
  CHECK(x.std({}, false).item() == Approx(std::sqrt(1.25)).epsilon(1e-15));
}

TEST_CASE("seeds: layer_norm equals the hand computation", "[autograd][reduce]") {
  Generator g(5);
  {  // (B, C) normalised over C: biased variance
    int64_t B = 3, C = 4;
    Tensor x = rand({B, C}, DType::F64, &g), w = rand({C}, DType::F64, &g), b = rand({C}, DType::F64, &g);
    Tensor out1 = layer_norm(x, {C}, w, b, 1e-5);
    Tensor m = x.mean({1});
    Tensor v = x.var({1});
    Tensor out2 = (x - m.view({-1, 1})) / sqrt(v.view({-1, 1}) * double(C - 1) / double(C) + 1e-5) * w + b;
    CHECK(allclose(out1, out2, 1e-12, 1e-12));
  }
  {  // (B, L, C1, C2) normalised over (C1, C2)
    Tensor x = rand({1, 2, 4, 3}, DType::F64, &g), w = rand({4, 3}, DType::F64, &g), b = rand({4, 3}, DType::F64, &g);
    Tensor out1 = layer_norm(x, {4, 3}, w, b, 1e-5);
    double features = 12;
    Tensor m = x.mean({-1, -2}, true);
    Tensor v = x.var({-1, -2}, true, true);
    Tensor out2 = (x - m) / sqrt(v * (features - 1) / features + 1e-5) * w + b;
    CHECK(allclose(out1, out2, 1e-12, 1e-12));
  }
}

TEST_CASE("post-accumulate-grad hooks see the accumulated gradient, once per backward", "[autograd]") {
  Tensor w = ones({3}, TensorOptions{DType::F64}.requires_grad());
  std::vector<double> seen;
  int h = register_post_accumulate_grad_hook(w, [&](Tensor& p) { seen.push_back(sum(p.grad()).item()); });
  // w is used twice: the engine sums both contributions before accumulating, so one call
  Tensor y = sum(w * 2.0) + sum(w * w);
  y.backward();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == Approx(12.0));  // (2 + 2*1) per element
  Tensor z = sum(w * 3.0);
  z.backward();  // accumulates into the existing grad
  REQUIRE(seen.size() == 2);
  CHECK(seen[1] == Approx(21.0));
  remove_post_accumulate_grad_hook(w, h);
  sum(w).backward();
  CHECK(seen.size() == 2);
  Tensor nonleaf = w * 2.0;
  CHECK_THROWS_WITH(register_post_accumulate_grad_hook(nonleaf, [](Tensor&) {}), Catch::Contains("leaf"));
}

}  // namespace test_autograd
