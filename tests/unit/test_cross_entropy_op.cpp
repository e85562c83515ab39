// The fused cross entropy (cross_entropy_rows and its backward, behind tr::cross_entropy with class
// indices): against the composite chain it replaces (backends::fusion() off), its correct flags
// against argmax, bf16 logits against the exact loss, RunLoss's accuracy metric, the memory it
// allocates, gradcheck cases, and ([gpu]) the CUDA kernels against the CPU's.
#include <catch2/catch.hpp>
#include <cmath>
#include "autograd/engine.h"
#include "core/allocator.h"
#include "core/grad_mode.h"
#include "fusion_switch.h"
#include "nn/losses/cross_entropy_loss.h"
#include "op_cases.h"
#include "ops/autocast.h"
#include "ops/backends.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "train/run_loss.h"
#include "unit/require_gpu.h"

namespace test_cross_entropy_op {

using namespace tr;
using namespace tr::test;
using Catch::Matchers::Contains;

namespace {

// Logits of scale 3 in dtype t.
Tensor logits(const Shape& s, DType t, uint64_t seed) {
  Generator g(seed);
  return (randn(s, DType::F64, &g) * 3.0).to(t);
}

// Class indices in [0, V) of shape s, every fourth one (from the second) set to ignore_index.
Tensor targets(const Shape& s, int64_t V, int64_t ignore_index, uint64_t seed) {
  Generator g(seed);
  std::vector<double> v = randint(0, V, s, DType::I64, &g).tolist();
  for (size_t i = 1; i < v.size(); i += 4) v[i] = double(ignore_index);
  return from_vector(v, s, DType::I64);
}

// The loss, the gradient of sum(loss w) by the logits (w: a fixed weight of the loss's shape) and
// the correct flags (undefined where the composite ran).
struct Result {
  Tensor loss, grad, correct;
};
Result run(const Tensor& x0, const Tensor& t, int64_t ii, double ls, const std::string& red) {
  Tensor x = x0.detach().requires_grad_(true);
  CrossEntropyOut o = cross_entropy_scored(x, t, ii, ls, red);
  Tensor w = o.loss.dim() ? cos(arange(0.0, double(o.loss.numel()), 1.0, DType::F64)).reshape(o.loss.sizes())
                          : tensor({1.75}).reshape({});
  sum(o.loss * w.to(o.loss.dtype())).backward();
  return {o.loss.detach(), x.grad(), o.correct};
}

// |a - b| <= atol + rtol |b| everywhere, NaN where NaN (b the reference).
bool close(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.sizes() != b.sizes()) return false;
  std::vector<double> u = a.tolist(), v = b.tolist();
  for (size_t i = 0; i < u.size(); ++i) {
    if (std::isnan(u[i]) || std::isnan(v[i])) {
      if (!(std::isnan(u[i]) && std::isnan(v[i]))) return false;
    } else if (!(std::abs(u[i] - v[i]) <= atol + rtol * std::abs(v[i]))) {
      return false;
    }
  }
  return true;
}

const char* const kReductions[] = {"none", "sum", "mean"};

}  // namespace

TEST_CASE("cross_entropy: the fused op equals the composite chain", "[cross_entropy][fused]") {
  struct Case {
    Shape x;
    int64_t ignore_index;
  };
  // N = 1, V of one element, V not a multiple of 8, of a CPU chunk (1024) or of a CUDA block;
  // ignore_index outside the classes and one that is a class; [C] and [N, C, d] inputs
  const Case cases[] = {{{1, 7}, -100},    {{1, 1}, -100}, {{9, 37}, -100}, {{13, 1000}, 3},
                        {{5, 2053}, -100}, {{6}, -100},    {{3, 11, 4}, 2}};
  for (DType dt : {DType::F64, DType::F32}) {
    for (const Case& c : cases) {
      const int64_t V = c.x.size() == 1 ? c.x[0] : c.x[1];
      Shape ts = c.x;
      ts.erase(ts.begin() + (c.x.size() == 1 ? 0 : 1));
      const Tensor x = logits(c.x, dt, 11), t = targets(ts, V, c.ignore_index, 12);
      for (double ls : {0.0, 0.1}) {
        for (const char* red : kReductions) {
          INFO(dtype_name(dt) << " x " << shape_str(c.x) << " ignore_index " << c.ignore_index << " ls " << ls << " "
                              << red);
          auto [ref, got] = unfused_and_fused([&] { return run(x, t, c.ignore_index, ls, red); });
          CHECK_FALSE(ref.correct.defined());
          REQUIRE(got.correct.defined());  // the fused op ran
          CHECK(got.correct.sizes() == t.sizes());
          CHECK(got.loss.dtype() == ref.loss.dtype());
          CHECK(got.grad.dtype() == dt);
          const double tol = dt == DType::F64 ? 1e-12 : 1e-5;
          CHECK(close(got.loss, ref.loss, tol, tol));
          // (f32: p - (1-ls) at the target cancels, so the error is the operands' ulp, not the result's)
          CHECK(close(got.grad, ref.grad, tol, dt == DType::F64 ? 1e-14 : 1e-6));
        }
      }
    }
  }
}

TEST_CASE("cross_entropy: every target ignored gives nan for mean, 0 for sum, and zero gradients",
          "[cross_entropy][fused]") {
  const Tensor x = logits({3, 5}, DType::F32, 1), t = from_vector({-100, -100, -100}, {3}, DType::I64);
  Result m = run(x, t, -100, 0.1, "mean"), s = run(x, t, -100, 0.1, "sum");
  CHECK(std::isnan(m.loss.item()));
  CHECK(s.loss.item() == 0.0);
  CHECK(equal(s.grad, zeros({3, 5})));
}

TEST_CASE("cross_entropy: the correct flags are argmax == target, ties to the lowest index, NaN wins",
          "[cross_entropy][fused]") {
  for (DType dt : {DType::F64, DType::F32, DType::BF16, DType::F16}) {
    INFO(dtype_name(dt));
    // multiples of 0.5 in [-3, 3): many ties; V crosses a CPU chunk
    Generator g(5);
    const Tensor x = (cast(cast(rand({40, 1100}, DType::F64, &g) * 12.0, DType::I64), DType::F64) * 0.5 - 3.0).to(dt);
    const Tensor am = argmax(x, 1);
    // targets: the argmax, the argmax's tie partner or its neighbour, and ignored rows
    std::vector<double> tv = am.tolist();
    for (size_t i = 0; i < tv.size(); ++i) {
      if (i % 3 == 1) tv[i] = double((int64_t(tv[i]) + 1) % 1100);
      if (i % 7 == 2) tv[i] = -100;
    }
    const Tensor t = from_vector(tv, {40}, DType::I64);
    auto r = dispatch("cross_entropy_rows", {x, t}, {{"ignore_index", int64_t(-100)}, {"label_smoothing", 0.0}});
    CHECK(equal(r[2], am == t));
  }
  // a NaN anywhere is the argmax (its first index), and the row's loss is NaN
  Tensor x = zeros({2, 20});
  x.select(0, 0).narrow(0, 13, 1).fill_(NAN);
  x.select(0, 1).narrow(0, 4, 1).fill_(2.0);
  auto r = dispatch("cross_entropy_rows", {x, from_vector({13, 4}, {2}, DType::I64)},
                    {{"ignore_index", int64_t(-100)}, {"label_smoothing", 0.0}});
  CHECK(r[2].tolist() == std::vector<double>{1, 1});
  CHECK(std::isnan(r[0].tolist()[0]));
  CHECK(equal(r[2], argmax(x, 1) == from_vector({13, 4}, {2}, DType::I64)));
}

TEST_CASE("cross_entropy: bf16 logits give the exact loss and gradient within bf16 rounding",
          "[cross_entropy][fused]") {
  const Tensor x = logits({17, 1501}, DType::BF16, 21), t = targets({17}, 1501, -100, 22);
  for (double ls : {0.0, 0.1}) {
    INFO("ls " << ls);
    // the exact values: the same bf16 numbers in f64, composite
    Result exact = unfused([&] { return run(x.to(DType::F64), t, -100, ls, "mean"); });
    Result r = run(x, t, -100, ls, "mean");
    CHECK(r.loss.dtype() == DType::BF16);  // the input's dtype, as the composite's
    CHECK(r.grad.dtype() == DType::BF16);
    CHECK(close(r.loss, exact.loss, 1.0 / 256, 0));  // one rounding to bf16
    CHECK(close(r.grad, exact.grad, 1.0 / 200, 1e-9));
    {
      amp::AutocastGuard ac(DeviceType::CPU, DType::BF16);
      Result a = run(x, t, -100, ls, "mean");
      CHECK(a.loss.dtype() == DType::F32);  // f32 under autocast, as the composite's
      CHECK(a.grad.dtype() == DType::BF16);
      CHECK(close(a.loss, exact.loss, 1e-5, 0));
      CHECK(close(a.grad, exact.grad, 1.0 / 200, 1e-9));
    }
  }
}

TEST_CASE("cross_entropy: the fused op's errors and argument checks", "[cross_entropy][fused]") {
  Tensor x = zeros({3, 4});
  CHECK_THROWS_WITH(cross_entropy(x, from_vector({1, 4, 0}, {3}, DType::I64)),
                    Contains("cross_entropy: target 4 is out of bounds for 4 classes"));
  const Attrs a{{"ignore_index", int64_t(-100)}, {"label_smoothing", 0.0}};
  CHECK_THROWS_WITH(dispatch("cross_entropy_rows", {zeros({3, 4, 2}), zeros({3}, DType::I64)}, a),
                    Contains("cross_entropy_rows") && Contains("[N, V]"));
  CHECK_THROWS_WITH(dispatch("cross_entropy_rows", {x, zeros({2}, DType::I64)}, a), Contains("int64 targets [3]"));
  CHECK_THROWS_WITH(dispatch("cross_entropy_rows_backward",
                             {zeros({3}, DType::F64), zeros({3}), x, zeros({3}, DType::I64), zeros({3})}, a),
                    Contains("of float32"));
}

TEST_CASE("cross_entropy: create_graph runs the differentiable formula and equals the fused gradient",
          "[cross_entropy][fused]") {
  const Tensor x0 = logits({4, 9}, DType::F64, 31), t = targets({4}, 9, -100, 32);
  Tensor x = x0.detach().requires_grad_(true);
  auto o = dispatch("cross_entropy_rows", {x, t}, {{"ignore_index", int64_t(-100)}, {"label_smoothing", 0.2}});
  const Tensor w = tensor({0.5, -1.0, 2.0, 0.25}, DType::F64);
  Tensor loss = sum(o[0] * w) + sum(o[1] * w * 0.3);  // both differentiable outputs
  Tensor g1 = autograd::grad({loss}, {x}, {}, true, true)[0];
  Tensor g2 = autograd::grad({loss}, {x}, {}, false, false)[0];
  CHECK(g1.requires_grad());
  CHECK(allclose(g1.detach(), g2, 1e-13, 1e-15));
}

TEST_CASE("cross_entropy: RunLoss's accuracy metric is the same with the fused op",
          "[cross_entropy][fused][registry]") {
  toml::table empty;
  train::RunLoss ce(Registry<nn::LossType>::get().at("cross_entropy").build(TomlTable(empty, "", "")), true);
  // [B, T, V] logits with ties, ignored targets, and targets that are the argmax half of the time
  Generator g(41);
  const Tensor out = (cast(cast(rand({3, 8, 50}, DType::F64, &g) * 8.0, DType::I64), DType::F64) * 0.5).to(DType::F32);
  std::vector<double> tv = argmax(out, 2).reshape({-1}).tolist();
  for (size_t i = 0; i < tv.size(); ++i) {
    if (i % 2) tv[i] = double((int64_t(tv[i]) + int64_t(i)) % 50);
    if (i % 5 == 4) tv[i] = -100;
  }
  const Tensor tg = from_vector(tv, {3, 8}, DType::I64);
  const int64_t want = int64_t(sum(cast(argmax(out, 2) == tg, DType::I64)).item());
  auto [ref, got] = unfused_and_fused([&] { return ce(out, tg); });
  CHECK(ref.second.item() == want);
  CHECK(got.second.item() == want);
  CHECK(got.second.dtype() == DType::I64);
  CHECK(got.first.item() == Approx(ref.first.item()).epsilon(1e-6));
}

TEST_CASE("cross_entropy: bf16 logits' forward and backward allocate the gradient and O(N), no f32 copy",
          "[cross_entropy][fused][memory]") {
  const int64_t N = 64, V = 8191;
  const int64_t bytes = N * V * 2;  // the bf16 logits, and their gradient
  // peak bytes above what was live before the logits existed, for one forward + backward
  auto peak = [&](bool autocast) {
    const int64_t base = memory_allocated(kCPU);
    int64_t p = 0;
    {
      const Tensor x0 = logits({N, V}, DType::BF16, 51), t = targets({N}, V, -100, 52);
      reset_peak_memory_stats(kCPU);
      Tensor x = x0.detach().requires_grad_(true);
      Tensor loss;
      {
        amp::AutocastGuard ac(DeviceType::CPU, DType::BF16, autocast);
        loss = cross_entropy(x, t, -100, 0.1);
      }
      loss.backward();
      REQUIRE(x.grad().dtype() == DType::BF16);
      p = max_memory_allocated(kCPU) - base;
    }
    return p;
  };
  const int64_t bound = 2 * bytes + 256 * N + 65536;
  for (bool autocast : {true, false}) {
    auto [composite, fused] = unfused_and_fused([&] { return peak(autocast); });
    INFO("autocast " << autocast << ": logits " << bytes << " B; peak of forward + backward: fused " << fused
                     << " B, composite " << composite << " B");
    CHECK(fused <= bound);
    CHECK(composite > bound);  // the check sees a copy of the logits
  }
}

// ---- gradcheck cases: both differentiable outputs, ignored rows, smoothing; through the API ----
namespace {
Tensor case_targets(const Tensor& like) { return from_vector({2, -100, 0, 4}, {4}, DType::I64).to(like.device()); }
Outputs loss_and_lse(const Tensor& x) {
  auto o =
      dispatch("cross_entropy_rows", {x, case_targets(x)}, {{"ignore_index", int64_t(-100)}, {"label_smoothing", 0.1}});
  return {o[0], o[1]};
}
}  // namespace
TR_OP_CASE("cross_entropy_rows", "loss and lse, ignored row, smoothing", ({randn64({4, 5}, 290)}),
           [](const Inputs& x) { return loss_and_lse(x[0]); });
TR_OP_CASE("cross_entropy_rows", "cross_entropy mean", ({randn64({4, 5}, 291)}),
           [](const Inputs& x) { return Outputs{cross_entropy(x[0], case_targets(x[0]))}; });

// ---- the CUDA kernels against the CPU's ----
TEST_CASE("cross_entropy_rows on CUDA matches the CPU", "[gpu][cross_entropy]") {
  TR_REQUIRE_GPU();
  const Device gpu(DeviceType::CUDA, 0);
  struct Geometry {
    int64_t N, V;
  };
  // a warp per row (V <= 1024) and a block per row; V not a multiple of 32 or 256
  const Geometry geometries[] = {{1, 7}, {37, 100}, {64, 1000}, {5, 1031}};
  for (DType dt : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    for (const Geometry& ge : geometries) {
      const Tensor x = logits({ge.N, ge.V}, dt, 61), t = targets({ge.N}, ge.V, -100, 62);
      const DType st = dt == DType::F64 ? DType::F64 : DType::F32;
      Generator g(63);
      const Tensor gl = randn({ge.N}, st, &g), gz = randn({ge.N}, st, &g) * 0.5;
      for (double ls : {0.0, 0.1}) {
        INFO(dtype_name(dt) << " [" << ge.N << ", " << ge.V << "] ls " << ls);
        const Attrs a{{"ignore_index", int64_t(-100)}, {"label_smoothing", ls}};
        auto c = dispatch("cross_entropy_rows", {x, t}, a);
        auto d = dispatch("cross_entropy_rows", {x.to(gpu), t.to(gpu)}, a);
        const double tol = st == DType::F64 ? 1e-12 : 1e-5;
        CHECK(close(d[0].to(kCPU), c[0], tol, tol));
        CHECK(close(d[1].to(kCPU), c[1], tol, tol));
        CHECK(equal(d[2].to(kCPU), c[2]));
        Tensor dc = dispatch1("cross_entropy_rows_backward", {gl, gz, x, t, c[1]}, a);
        Tensor dd =
            dispatch1("cross_entropy_rows_backward", {gl.to(gpu), gz.to(gpu), x.to(gpu), t.to(gpu), c[1].to(gpu)}, a);
        REQUIRE(dd.dtype() == dt);
        // f16 / bf16: the f32 values may round to neighbouring numbers
        const double rt = dt == DType::BF16 ? 1.0 / 128 : dt == DType::F16 ? 1.0 / 1024 : tol;
        CHECK(close(dd.to(kCPU), dc, rt, st == DType::F64 ? 1e-15 : 1e-7));
      }
    }
  }
}

TEST_CASE("cross_entropy on CUDA: bf16 logits under autocast, within bf16 rounding of the exact loss",
          "[gpu][cross_entropy]") {
  TR_REQUIRE_GPU();
  const Device gpu(DeviceType::CUDA, 0);
  const Tensor x = logits({24, 1100}, DType::BF16, 71), t = targets({24}, 1100, -100, 72);
  Result exact = unfused([&] { return run(x.to(DType::F64), t, -100, 0.1, "mean"); });
  amp::AutocastGuard ac(DeviceType::CUDA, DType::BF16);
  Result r = run(x.to(gpu), t.to(gpu), -100, 0.1, "mean");
  CHECK(r.loss.dtype() == DType::F32);
  REQUIRE(r.grad.dtype() == DType::BF16);
  CHECK(close(r.loss.to(kCPU), exact.loss, 1e-5, 0));
  CHECK(close(r.grad.to(kCPU), exact.grad, 1.0 / 200, 1e-9));
  CHECK(equal(r.correct.to(kCPU), argmax(x, 1) == t));
}

}  // namespace test_cross_entropy_op
