// The fused layer-norm ops (native_layer_norm, native_layer_norm_backward): against the composite
// of ops that states the formula, gradcheck and gradgradcheck (the second order runs the
// differentiable formulas), thread-count independence, and the argument checks.
#include <catch2/catch.hpp>
#include <omp.h>
#include "core/grad_mode.h"
#include "op_cases.h"
#include "ops/ops.h"
#include "ops/registry.h"

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
  Tensor x = x0.detach().requires_grad_(true), w = w0.detach().requires_grad_(true), b = b0.detach().requires_grad_(true);
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
      auto fused = run([](auto& a, auto& w_, auto& b_) { return layer_norm(a, {a.size(-1)}, w_, b_, 1e-5); }, x, w, b, gy);
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
  CHECK_THROWS_WITH(dispatch("native_layer_norm_backward", {zeros({3, 5}), x, zeros({4}), zeros({3}), zeros({3})},
                             {{"eps", 1e-5}}),
                    Contains("grad_output") && Contains("[3, 5]"));
}

TR_OP_CASE("native_layer_norm", "rows through layer_norm, 3-D input",
           ({randn64({2, 3, 5}, 301), randn64({5}, 302), randn64({5}, 303)}),
           [](const Inputs& x) { return Outputs{layer_norm(x[0], {5}, x[1], x[2], 1e-5)}; });
TR_OP_CASE("native_layer_norm", "two normalised dims, eps 1e-1",
           ({randn64({3, 2, 4}, 304), randn64({2, 4}, 305), randn64({2, 4}, 306)}),
           [](const Inputs& x) { return Outputs{layer_norm(x[0], {2, 4}, x[1], x[2], 1e-1)}; });
