// The fused batch-norm ops (batch_norm, batch_norm_backward, batch_norm_elemt): outputs, statistics
// and gradients against the composite of mean/var/rsqrt/mul/add on awkward shapes (NC, NCL, NCHW,
// non-contiguous, f32/f64/bf16), independence of the thread count, errors, and gradcheck /
// gradgradcheck cases of all three ops.
#include <catch2/catch.hpp>
#include <omp.h>
#include "op_cases.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace test_batch_norm_op {

using namespace tr;
using namespace tr::test;

namespace {

Tensor randn_t(const Shape& s, DType t, uint64_t seed, double scale = 1.0, double shift = 0.0) {
  Generator g(seed);
  return (randn(s, TensorOptions(DType::F64), &g) * scale + shift).to(t);
}

Shape stat_dims(int64_t nd) {
  Shape d{0};
  for (int64_t i = 2; i < nd; ++i) d.push_back(i);
  return d;
}
Tensor per_channel(const Tensor& v, int64_t nd) {
  Shape s(size_t(nd), 1);
  s[1] = v.numel();
  return v.reshape(s);
}

// The specification: (x - mean) / sqrt(var + eps) * w + b with the batch's mean and biased var.
Tensor composite_train(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  Shape dims = stat_dims(x.dim());
  Tensor y = (x - mean(x, dims, true)) * rsqrt(var(x, dims, 0.0, true) + eps);
  return y * per_channel(w, x.dim()) + per_channel(b, x.dim());
}

struct Grads {
  Tensor y, gx, gw, gb;
};
// Output and gradients for the loss <y, gy>, through `f`.
Grads run(const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& f, const Tensor& x0,
          const Tensor& w0, const Tensor& b0, const Tensor& gy) {
  Tensor x = x0.detach().requires_grad_(true), w = w0.detach().requires_grad_(true),
         b = b0.detach().requires_grad_(true);
  Tensor y = f(x, w, b);
  y.backward(gy);
  return {y.detach(), x.grad(), w.grad(), b.grad()};
}

void check_against_composite(const Shape& s, DType t, double tol, uint64_t seed, bool strided = false) {
  INFO("shape " << str(s) << " dtype " << dtype_name(t) << (strided ? " strided" : ""));
  const int64_t C = s[1];
  Tensor x = randn_t(s, t, seed, 2.0, 0.5);
  if (strided) {  // every other element of a tensor twice as long in the last dim
    Shape s2 = s;
    s2.back() *= 2;
    x = randn_t(s2, t, seed, 2.0, 0.5).slice(-1, 0, s2.back(), 2);
    REQUIRE_FALSE(x.is_contiguous());
  }
  Tensor w = randn_t({C}, t, seed + 1), b = randn_t({C}, t, seed + 2), gy = randn_t(s, t, seed + 3);
  const double eps = 1e-5;
  Grads fused = run([&](const Tensor& x_, const Tensor& w_,
                        const Tensor& b_) { return batch_norm(x_, Tensor(), Tensor(), w_, b_, true, eps).output; },
                    x, w, b, gy);
  Grads ref =
      run([&](const Tensor& x_, const Tensor& w_, const Tensor& b_) { return composite_train(x_, w_, b_, eps); }, x, w,
          b, gy);
  CHECK(allclose(fused.y, ref.y, tol, tol));
  CHECK(allclose(fused.gx, ref.gx, tol, tol));
  CHECK(allclose(fused.gw, ref.gw, tol, tol));
  CHECK(allclose(fused.gb, ref.gb, tol, tol));
  // the statistics: mean and biased var per channel
  BatchNormOut r = batch_norm(x, Tensor(), Tensor(), w, b, true, eps);
  Shape dims = stat_dims(x.dim());
  CHECK(allclose(r.mean, mean(x, dims), tol, tol));
  CHECK(allclose(r.var, var(x, dims, 0.0), tol, tol));
  CHECK_FALSE(r.mean.requires_grad());
  // eval: the given statistics
  Tensor rm = randn_t({C}, t, seed + 4), rv = tr::abs(randn_t({C}, DType::F64, seed + 5)).to(t) + 0.5;
  Tensor ye = batch_norm(x, rm, rv, w, b, false, eps).output;
  Tensor want = (x - per_channel(rm, x.dim())) * rsqrt(per_channel(rv, x.dim()) + eps) * per_channel(w, x.dim()) +
                per_channel(b, x.dim());
  CHECK(allclose(ye, want, tol, tol));
}

}  // namespace

TEST_CASE("batch_norm ops match the composite on awkward shapes", "[batch_norm]") {
  uint64_t seed = 500;
  for (Shape s : {Shape{5, 3}, Shape{2, 4, 7}, Shape{3, 2, 5, 3}, Shape{1, 3, 1, 9}, Shape{7, 1, 2, 2},
                  Shape{4, 33, 2, 5}, Shape{2, 3, 2, 2, 3}}) {
    check_against_composite(s, DType::F64, 1e-10, seed);
    check_against_composite(s, DType::F32, 1e-4, seed);
    check_against_composite(s, DType::F64, 1e-10, seed + 7, true);
    seed += 10;
  }
}

TEST_CASE("batch_norm ops: a large channel keeps f32 accuracy", "[batch_norm]") {
  // values far from zero: the two-pass double statistics keep the variance accurate
  check_against_composite({64, 4, 16, 16}, DType::F32, 2e-4, 600);
  Tensor x = randn_t({32, 3, 8, 8}, DType::F32, 601, 1e-2, 1e3);
  BatchNormOut r = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 1e-5);
  Tensor x64 = x.to(DType::F64);
  CHECK(allclose(r.var.to(DType::F64), var(x64, {0, 2, 3}, 0.0), 1e-3, 0));
}

TEST_CASE("batch_norm ops: results do not depend on the thread count", "[batch_norm]") {
  const int saved = omp_get_max_threads();
  Tensor x = randn_t({16, 12, 9, 9}, DType::F32, 700), w = randn_t({12}, DType::F32, 701);
  Tensor b = randn_t({12}, DType::F32, 702), gy = randn_t({16, 12, 9, 9}, DType::F32, 703);
  std::vector<Grads> rs;
  for (int nt : {1, 2, 3}) {
    omp_set_num_threads(nt);
    rs.push_back(run([](const Tensor& x_, const Tensor& w_,
                        const Tensor& b_) { return batch_norm(x_, Tensor(), Tensor(), w_, b_, true, 1e-5).output; },
                     x, w, b, gy));
  }
  omp_set_num_threads(saved);
  for (size_t i = 1; i < rs.size(); ++i) {
    CHECK(equal(rs[i].y, rs[0].y));
    CHECK(equal(rs[i].gx, rs[0].gx));
    CHECK(equal(rs[i].gw, rs[0].gw));
    CHECK(equal(rs[i].gb, rs[0].gb));
  }
}

TEST_CASE("batch_norm ops: bf16 and f16 compute in f32 and keep their dtype", "[batch_norm]") {
  for (DType t : {DType::BF16, DType::F16}) {
    Tensor x = randn_t({4, 3, 5, 5}, t, 800), w = randn_t({3}, t, 801), b = randn_t({3}, t, 802);
    Tensor y = batch_norm(x, Tensor(), Tensor(), w, b, true, 1e-5).output;
    CHECK(y.dtype() == t);
    Tensor ref = composite_train(x.to(DType::F32), w.to(DType::F32), b.to(DType::F32), 1e-5);
    CHECK(allclose(y.to(DType::F32), ref, 2e-2, 5e-2));
  }
}

TEST_CASE("batch_norm ops: undefined weight and bias are 1 and 0, mixed dtypes promote", "[batch_norm]") {
  Tensor x = randn_t({6, 3, 4}, DType::F64, 900);
  Tensor y = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 1e-3).output;
  CHECK(allclose(y, composite_train(x, ones({3}, DType::F64), zeros({3}, DType::F64), 1e-3), 1e-12, 1e-12));
  // f32 input with f64 parameters takes the composite, which promotes as before
  Tensor y2 =
      batch_norm(x.to(DType::F32), Tensor(), Tensor(), ones({3}, DType::F64), zeros({3}, DType::F64), true).output;
  CHECK(y2.dtype() == DType::F64);
}

TEST_CASE("batch_norm ops: errors name the op and the shapes", "[batch_norm]") {
  using Catch::Matchers::Contains;
  Tensor x = zeros({4, 3, 2});
  Attrs eps{{"eps", 1e-5}};
  CHECK_THROWS_WITH(dispatch("batch_norm", {x, zeros({4}), zeros({3})}, eps),
                    Contains("batch_norm") && Contains("weight") && Contains("[4]") && Contains("[4, 3, 2]"));
  CHECK_THROWS_WITH(dispatch("batch_norm", {zeros({4}), zeros({4}), zeros({4})}, eps),
                    Contains("batch_norm") && Contains("at least 2 dims"));
  CHECK_THROWS_WITH(dispatch("batch_norm", {x, zeros({3}, DType::F64), zeros({3})}, eps),
                    Contains("batch_norm") && Contains("same dtype"));
  CHECK_THROWS_WITH(dispatch("batch_norm_backward", {zeros({4, 3}), x, zeros({3}), zeros({3}), ones({3})}, eps),
                    Contains("batch_norm_backward") && Contains("grad_output") && Contains("[4, 3]"));
  CHECK_THROWS_WITH(dispatch("batch_norm_elemt", {x, zeros({3}), zeros({3}), zeros({2}), ones({3})}, eps),
                    Contains("batch_norm_elemt") && Contains("mean") && Contains("[2]"));
  CHECK_THROWS_WITH(batch_norm(zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                    Contains("more than 1 value per channel"));
  CHECK_THROWS_WITH(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false),
                    Contains("running_mean and running_var"));
}

// ---------------------------------------------------------------- gradcheck cases (f64)

namespace {
// batch_norm_backward at the batch statistics of x (recomputed from the perturbed x each call, as
// the op's backward assumes): outputs gx, gweight, gbias.
Outputs bn_backward(const Inputs& x, double eps) {
  Shape dims = stat_dims(x[1].dim());
  Tensor m = mean(x[1], dims).detach(), v = var(x[1], dims, 0.0).detach();
  return dispatch("batch_norm_backward", {x[0], x[1], x[2], m, v}, {{"eps", eps}});
}
}  // namespace

TR_OP_CASE("batch_norm", "NCHW", ({randn64({3, 2, 2, 3}, 231), randn64({2}, 232), randn64({2}, 233)}),
           [](const Inputs& x) { return Outputs{batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true).output}; });
TR_OP_CASE("batch_norm", "NC, eps 1e-2", ({randn64({5, 3}, 234), randn64({3}, 235), randn64({3}, 236)}),
           [](const Inputs& x) {
             return Outputs{batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true, 1e-2).output};
           });
TR_OP_CASE("batch_norm_backward", "NCL", ({randn64({2, 3, 4}, 237), randn64({2, 3, 4}, 238), randn64({3}, 239)}),
           [](const Inputs& x) { return bn_backward(x, 1e-5); });
TR_OP_CASE("batch_norm_backward", "NCHW, eps 1e-1",
           ({randn64({2, 2, 2, 3}, 240), randn64({2, 2, 2, 3}, 241), randn64({2}, 242)}),
           [](const Inputs& x) { return bn_backward(x, 1e-1); });
TR_OP_CASE("batch_norm_elemt", "NCHW, every input",
           ({randn64({2, 3, 2, 2}, 243), randn64({3}, 244), randn64({3}, 245), randn64({3}, 246),
             uniform64({3}, 0.5, 2.0, 247)}),
           [](const Inputs& x) {
             return Outputs{dispatch1("batch_norm_elemt", {x[0], x[1], x[2], x[3], x[4]}, {{"eps", 1e-5}})};
           });
TR_OP_CASE("batch_norm_elemt", "NC through batch_norm(training=false)",
           ({randn64({4, 3}, 248), randn64({3}, 249), randn64({3}, 250)}), [](const Inputs& x) {
             Tensor rm = tensor({0.1, -0.2, 0.3}).to(DType::F64).to(x[0].device());
             Tensor rv = tensor({0.5, 1.5, 2.0}).to(DType::F64).to(x[0].device());
             return Outputs{batch_norm(x[0], rm, rv, x[1], x[2], false).output};
           });

}  // namespace test_batch_norm_op
