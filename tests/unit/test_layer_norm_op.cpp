// The fused layer-norm ops (native_layer_norm, _add_native_layer_norm and their backward): against
// the composite of ops that states the formula, gradcheck and gradgradcheck (the second order runs
// the differentiable formulas), thread-count independence, the low-precision results and the fused
// residual add bit for bit against the chain they replace, and the argument checks.
#include <catch2/catch.hpp>
#include <omp.h>
#include "core/grad_mode.h"
#include "fusion_switch.h"
#include "op_cases.h"
#include "ops/backends.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace test_layer_norm_op {

using namespace tr;
using namespace tr::test;
using Catch::Matchers::Contains;

namespace {

// The composite: (x - E[x]) / sqrt(Var[x] + eps) w + b over the last dim.
Tensor composite(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  Tensor mu = mean(x, {-1}, true), v = var(x, {-1}, 0.0, true);
  return (x - mu) * rsqrt(v + eps) * w + b;
}

// y and the gradients of sum(y * gy) by x, w and b, through `f`.
std::vector<Tensor> run(const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& f, const Tensor& x0,
                        const Tensor& w0, const Tensor& b0, const Tensor& gy) {
  Tensor x = x0.detach().requires_grad_(true), w = w0.detach().requires_grad_(true),
         b = b0.detach().requires_grad_(true);
  Tensor y = f(x, w, b);
  y.backward(gy);
  return {y.detach(), x.grad(), w.grad(), b.grad()};
}

}  // namespace

TEST_CASE("native_layer_norm and its backward equal the composite", "[layer_norm]") {
  for (DType t : {DType::F64, DType::F32}) {
    for (Shape s : {Shape{4, 7}, Shape{3, 5, 33}, Shape{2, 300, 128}}) {
      INFO(dtype_name(t) << " " << shape_str(s));
      Generator g(3);
      const int64_t n = s.back();
      Tensor x = randn(s, t, &g) * 3.0 + 1.0, w = randn({n}, t, &g), b = randn({n}, t, &g), gy = randn(s, t, &g);
      auto fused =
          run([](auto& a, auto& w_, auto& b_) { return layer_norm(a, {a.size(-1)}, w_, b_, 1e-5); }, x, w, b, gy);
      auto comp = run([](auto& a, auto& w_, auto& b_) { return composite(a, w_, b_, 1e-5); }, x, w, b, gy);
      const double tol = t == DType::F64 ? 1e-12 : 2e-5;
      const char* names[] = {"y", "dx", "dw", "db"};
      for (size_t i = 0; i < fused.size(); ++i) {
        INFO(names[i]);
        CHECK(allclose(fused[i], comp[i], tol, tol));
      }
    }
  }
  // the fused path is the one taken: its statistics are outputs of the op
  Tensor rows = randn({3, 4}, DType::F64);
  auto r = dispatch("native_layer_norm", {rows, ones({4}, DType::F64), zeros({4}, DType::F64)}, {{"eps", 1e-5}});
  CHECK(allclose(r[1], mean(rows, {1})));
  CHECK(allclose(r[2], rsqrt(var(rows, {1}, 0.0) + 1e-5)));
}

TEST_CASE("native_layer_norm: results do not depend on the thread count", "[layer_norm]") {
  Generator g(4);
  Tensor x = randn({257, 96}, DType::F32, &g), w = randn({96}, DType::F32, &g), b = randn({96}, DType::F32, &g),
         gy = randn({257, 96}, DType::F32, &g);
  auto f = [](auto& a, auto& w_, auto& b_) { return layer_norm(a, {96}, w_, b_, 1e-5); };
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  auto one = run(f, x, w, b, gy);
  omp_set_num_threads(std::max(2, saved));
  auto many = run(f, x, w, b, gy);
  omp_set_num_threads(saved);
  for (size_t i = 0; i < one.size(); ++i) CHECK(equal(one[i], many[i]));
}

TEST_CASE("native_layer_norm: argument errors name the op and the shapes", "[layer_norm]") {
  Tensor x = zeros({3, 4});
  CHECK_THROWS_WITH(dispatch("native_layer_norm", {x, zeros({5}), zeros({4})}, {{"eps", 1e-5}}),
                    Contains("native_layer_norm") && Contains("[4]") && Contains("[5]"));
  CHECK_THROWS_WITH(dispatch("native_layer_norm", {zeros({2, 3, 4}), zeros({4}), zeros({4})}, {{"eps", 1e-5}}),
                    Contains("rows [R, N]"));
  CHECK_THROWS_WITH(
      dispatch("native_layer_norm_backward", {zeros({3, 5}), x, zeros({4}), zeros({3}), zeros({3})}, {{"eps", 1e-5}}),
      Contains("grad_output") && Contains("[3, 5]"));
}

TR_OP_CASE("native_layer_norm", "rows through layer_norm, 3-D input",
           ({randn64({2, 3, 5}, 301), randn64({5}, 302), randn64({5}, 303)}),
           [](const Inputs& x) { return Outputs{layer_norm(x[0], {5}, x[1], x[2], 1e-5)}; });
TR_OP_CASE("native_layer_norm", "two normalised dims, eps 1e-1",
           ({randn64({3, 2, 4}, 304), randn64({2, 4}, 305), randn64({2, 4}, 306)}), [](const Inputs& x) {
             return Outputs{layer_norm(x[0], {2, 4}, x[1], x[2], 1e-1)};
           });

// add_layer_norm in f64 takes _add_native_layer_norm (h of x's dtype, y of x's dtype): s and y
// both reach the sum, so gradcheck covers gs + dnorm/ds
Outputs add_layer_norm_case(const Inputs& x) {
  const auto sy = add_layer_norm(x[0], x[1], {6}, x[2], x[3], 1e-5, DType::F64);
  return Outputs{sy.first, sy.second};
}
TR_OP_CASE("_add_native_layer_norm", "residual add fused into the norm, 3-D",
           ({randn64({2, 3, 6}, 311), randn64({2, 3, 6}, 312), randn64({6}, 313), randn64({6}, 314)}),
           add_layer_norm_case);

namespace {

// The fused norms with a low-precision result, and the composite chain they stand for (fusion
// off): s = x + h (h f32 or bf16), y = layer_norm(s).to(low); the results and every gradient of
// sum(s gs) + sum(y gy), bit for bit.
std::vector<Tensor> add_norm_grads(const Tensor& x0, const Tensor& h0, const Tensor& w0, const Tensor& b0,
                                   const Tensor& gs, const Tensor& gy, DType low, bool with_add) {
  Tensor x = x0.detach().requires_grad_(true), h = h0.detach().requires_grad_(true),
         w = w0.detach().requires_grad_(true), b = b0.detach().requires_grad_(true);
  const int64_t n = x.size(-1);
  if (!with_add) {
    Tensor y = layer_norm(x, {n}, w, b, 1e-5, low);
    y.backward(gy);
    return {y.detach(), x.grad(), w.grad(), b.grad()};
  }
  auto [s, y] = add_layer_norm(x, h, {n}, w, b, 1e-5, low);
  (sum(s * gs) + sum(y.to(DType::F32) * gy)).backward();
  return {s.detach(), y.detach(), x.grad(), h.grad(), w.grad(), b.grad()};
}

}  // namespace

TEST_CASE("layer_norm to a low dtype and add_layer_norm equal the composite chain bit for bit", "[layer_norm]") {
  for (DType low : {DType::BF16, DType::F16}) {
    for (DType ht : {DType::F32, low}) {
      for (bool with_add : {false, true}) {
        if (!with_add && ht != DType::F32) continue;
        INFO(dtype_name(low) << " h " << dtype_name(ht) << (with_add ? " with the add" : " norm only"));
        Generator g(21);
        const Shape s{3, 37, 96};
        Tensor x = randn(s, DType::F32, &g) * 2.0 + 0.5, h = randn(s, DType::F32, &g).to(ht),
               w = randn({96}, DType::F32, &g), b = randn({96}, DType::F32, &g), gs = randn(s, DType::F32, &g),
               gy = with_add ? randn(s, DType::F32, &g) : randn(s, DType::F32, &g).to(low);
        auto fused = add_norm_grads(x, h, w, b, gs, gy, low, with_add);
        auto comp = unfused([&] { return add_norm_grads(x, h, w, b, gs, gy, low, with_add); });
        REQUIRE(fused.size() == comp.size());
        for (size_t i = 0; i < fused.size(); ++i) {
          INFO("result " << i);
          CHECK(fused[i].dtype() == comp[i].dtype());
          CHECK(equal(fused[i], comp[i]));
        }
      }
    }
  }
  // the fused ops are the ones taken: one node, and the low dtype comes from the kernel
  Tensor x = randn({4, 8}).requires_grad_(true), h = randn({4, 8}).to(DType::BF16);
  auto [s, y] = add_layer_norm(x, h, {8}, ones({8}), zeros({8}), 1e-5, DType::BF16);
  CHECK(y.dtype() == DType::BF16);
  CHECK(s.grad_fn() == y.grad_fn());
}

TEST_CASE("_add_native_layer_norm: argument errors name the op and the dtypes", "[layer_norm]") {
  Tensor x = zeros({3, 4}), w = ones({4}), b = zeros({4});
  CHECK_THROWS_WITH(dispatch("_add_native_layer_norm", {x, zeros({3, 5}), w, b}, {{"eps", 1e-5}}),
                    Contains("_add_native_layer_norm") && Contains("[3, 5]"));
  CHECK_THROWS_WITH(dispatch("_add_native_layer_norm", {x, zeros({3, 4}, DType::F16), w, b},
                             {{"eps", 1e-5}, {"out_dtype", int64_t(DType::BF16)}}),
                    Contains("float16") && Contains("bfloat16"));
  CHECK_THROWS_WITH(
      dispatch("native_layer_norm", {zeros({3, 4}, DType::F64), ones({4}, DType::F64), zeros({4}, DType::F64)},
               {{"eps", 1e-5}, {"out_dtype", int64_t(DType::BF16)}}),
      Contains("out_dtype") && Contains("float64"));
}

}  // namespace test_layer_norm_op
