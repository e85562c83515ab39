// linear and linear_relu on CUDA (addmm / addmm_relu through cuBLASLt's BIAS and RELU_BIAS
// epilogues, the weight and bias gradients through one GEMM with BGRADB) against the CPU: values
// and gradients in f32, f16 and bf16, inputs that are views at offsets the heuristic must be told
// of; and the cases that take cuBLAS instead (f64, a size-1 dim, a strided slice, a bias not
// aligned to 16 bytes), which must agree as well. The launch counts are held by
// tests/integration/test_cuda_linear_launches.cpp.
#include <catch2/catch.hpp>
#include <cmath>
#include "fusion_switch.h"
#include "ops/backends.h"
#include "ops/registry.h"
#include "ops/ops.h"
#include "unit/require_gpu.h"

namespace test_addmm_cuda {

using namespace tr;

namespace {

Device gpu() { return Device(DeviceType::CUDA, 0); }

struct Grads {
  Tensor y, gx, gw, gb;
};

// y = linear(_relu)(x, w, b) and the gradients of sum(y * gy); x, w, b are leaves on their device.
Grads run(bool relu, const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& gy) {
  Tensor x = x0.detach().requires_grad_(true), w = w0.detach().requires_grad_(true),
         b = b0.detach().requires_grad_(true);
  Grads r;
  r.y = relu ? linear_relu(x, w, b) : linear(x, w, b);
  r.y.backward(gy);
  return {r.y, x.grad(), w.grad(), b.grad()};
}

// |got - want| <= atol + rtol |want| elementwise, compared in f64 on the CPU.
void check_near(const std::string& what, const Tensor& want, const Tensor& got, double rtol, double atol) {
  INFO(what);
  REQUIRE(got.defined());
  CHECK(got.device().is_cuda());
  CHECK(got.dtype() == want.dtype());
  REQUIRE(got.sizes() == want.sizes());
  const Tensor w = want.to(DType::F64), g = got.to(kCPU).to(DType::F64);
  const double worst = max(abs(g - w) - abs(w) * rtol).item();
  INFO("largest |got - want| - rtol |want|: " << worst << " (atol " << atol << ")");
  CHECK(worst <= atol);
}

struct Tol {
  double rtol, atol;
};
Tol tol_for(DType t) {
  switch (t) {
    case DType::F32: return {1e-5, 1e-5};
    case DType::F64: return {1e-12, 1e-12};
    case DType::F16: return {2e-3, 2e-3};
    default: return {1.6e-2, 1.6e-2};
  }
}

// linear(_relu) of (x, w, b) on the CPU and on CUDA; gradients compared directly where the relu
// masks agree (f32, f64), else against the CPU's formulas under the CUDA output's mask (a value
// that rounds to 0 on one side only).
void compare(const std::string& what, bool relu, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& gy) {
  INFO(what << (relu ? " relu" : "") << " " << dtype_name(x.dtype()));
  const Grads c = run(relu, x, w, b, gy), g = run(relu, x.to(gpu()), w.to(gpu()), b.to(gpu()), gy.to(gpu()));
  const Tol t = tol_for(x.dtype());
  // the weight and bias gradients sum M rows, and cuBLASLt may reduce split-K partial sums in the
  // output's f16/bf16 (PyTorch's default allow_fp16_reduced_precision_reduction permits the same):
  // on an H200, 4 units of f16's last place more than one rounding
  const double k = x.dtype() == DType::F32 || x.dtype() == DType::F64 ? 1.0 : 4.0;
  check_near("y", c.y, g.y, t.rtol, t.atol);
  if (!relu || x.dtype() == DType::F32 || x.dtype() == DType::F64) {
    check_near("grad x", c.gx, g.gx, t.rtol * k, t.atol * k);
    check_near("grad w", c.gw, g.gw, t.rtol * k, t.atol * k);
    check_near("grad b", c.gb, g.gb, t.rtol * k, t.atol * k);
    return;
  }
  const Tensor mask = (g.y.to(kCPU) > 0.0).to(DType::F32);
  const Tensor gm = (gy.to(DType::F32) * mask).reshape({-1, w.size(0)});
  const Tensor x2 = x.to(DType::F32).reshape({-1, w.size(1)});
  check_near("grad b (under the CUDA mask)", gm.sum({0}).to(x.dtype()), g.gb, t.rtol * k, t.atol * k);
  check_near("grad w (under the CUDA mask)", mm(gm.t(), x2).to(x.dtype()), g.gw, t.rtol * k, t.atol * k);
  check_near("grad x (under the CUDA mask)", mm(gm, w.to(DType::F32)).reshape(x.sizes()).to(x.dtype()), g.gx,
             t.rtol * k, t.atol * k);
}

Tensor randn_as(const Shape& s, DType t, Generator& gen, double scale = 1.0) {
  return (randn(s, DType::F32, &gen) * scale).to(t);
}

}  // namespace

TEST_CASE("addmm on CUDA: cuBLASLt's epilogues equal the CPU, values and gradients", "[gpu][addmm]") {
  TR_REQUIRE_GPU();
  Generator gen(11);
  struct Case {
    Shape x;
    int64_t out;
  };
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (const Case& c : {Case{{64, 48}, 32}, Case{{2, 17, 24}, 40}, Case{{5, 3}, 7}, Case{{128, 96}, 33}})
      for (bool relu : {false, true}) {
        Shape ys = c.x;
        ys.back() = c.out;
        Tensor x = randn_as(c.x, t, gen), w = randn_as({c.out, c.x.back()}, t, gen, 0.2), b = randn_as({c.out}, t, gen),
               gy = randn_as(ys, t, gen);
        compare("x " + shape_str(c.x) + " out " + std::to_string(c.out), relu, x, w, b, gy);
      }
}

TEST_CASE("addmm on CUDA: views at offsets (the heuristic is told their alignment)", "[gpu][addmm]") {
  TR_REQUIRE_GPU();
  Generator gen(12);
  for (DType t : {DType::F32, DType::BF16}) {
    // rows 1.. of a [65, 48] input: 48 elements in, so 96 or 192 bytes off the block
    Tensor big = randn_as({65, 48}, t, gen), w = randn_as({32, 48}, t, gen, 0.2), b = randn_as({32}, t, gen);
    Tensor gy = randn_as({64, 32}, t, gen);
    Tensor gbig = big.to(gpu());
    const Grads g = run(false, gbig.narrow(0, 1, 64), w.to(gpu()), b.to(gpu()), gy.to(gpu()));
    const Grads c = run(false, big.narrow(0, 1, 64), w, b, gy);
    const Tol tl = tol_for(t);
    check_near("y of the offset view", c.y, g.y, tl.rtol, tl.atol);
    check_near("grad w of the offset view", c.gw, g.gw, 2 * tl.rtol, 2 * tl.atol);
    check_near("grad b of the offset view", c.gb, g.gb, 2 * tl.rtol, 2 * tl.atol);
  }
}

TEST_CASE("addmm on CUDA: the cases cuBLASLt does not take run on cuBLAS and agree", "[gpu][addmm]") {
  TR_REQUIRE_GPU();
  Generator gen(13);
  SECTION("f64") {
    Tensor x = randn_as({16, 12}, DType::F64, gen), w = randn_as({8, 12}, DType::F64, gen),
           b = randn_as({8}, DType::F64, gen), gy = randn_as({16, 8}, DType::F64, gen);
    for (bool relu : {false, true}) compare("f64", relu, x, w, b, gy);
  }
  SECTION("a size-1 dim: one row, one output feature, one input feature") {
    for (DType t : {DType::F32, DType::BF16})
      for (bool relu : {false, true}) {
        compare("one row", relu, randn_as({1, 16}, t, gen), randn_as({8, 16}, t, gen), randn_as({8}, t, gen),
                randn_as({1, 8}, t, gen));
        compare("one output", relu, randn_as({16, 12}, t, gen), randn_as({1, 12}, t, gen), randn_as({1}, t, gen),
                randn_as({16, 1}, t, gen));
        compare("one input", relu, randn_as({16, 1}, t, gen), randn_as({8, 1}, t, gen), randn_as({8}, t, gen),
                randn_as({16, 8}, t, gen));
      }
  }
  SECTION("an input sliced from wider rows (ld above its rows)") {
    for (DType t : {DType::F32, DType::BF16}) {
      Tensor wide = randn_as({32, 40}, t, gen), w = randn_as({16, 24}, t, gen, 0.2), b = randn_as({16}, t, gen);
      Tensor gy = randn_as({32, 16}, t, gen);
      Tensor gwide = wide.to(gpu());
      const Grads c = run(false, wide.narrow(1, 0, 24), w, b, gy);
      const Grads g = run(false, gwide.narrow(1, 0, 24), w.to(gpu()), b.to(gpu()), gy.to(gpu()));
      const Tol tl = tol_for(t);
      check_near("y", c.y, g.y, tl.rtol, tl.atol);
      check_near("grad w", c.gw, g.gw, 2 * tl.rtol, 2 * tl.atol);
      check_near("grad b", c.gb, g.gb, 2 * tl.rtol, 2 * tl.atol);
    }
  }
  SECTION("a bias 4 bytes off a 16-byte boundary") {
    Tensor x = randn_as({16, 12}, DType::F32, gen), w = randn_as({8, 12}, DType::F32, gen);
    Tensor bias_store = randn_as({9}, DType::F32, gen), gy = randn_as({16, 8}, DType::F32, gen);
    Tensor gstore = bias_store.to(gpu());
    for (bool relu : {false, true}) {
      const Grads c = run(relu, x, w, bias_store.narrow(0, 1, 8), gy);
      const Grads g = run(relu, x.to(gpu()), w.to(gpu()), gstore.narrow(0, 1, 8), gy.to(gpu()));
      check_near("y", c.y, g.y, 1e-5, 1e-5);
      check_near("grad b", c.gb, g.gb, 1e-5, 1e-5);
    }
  }
}

TEST_CASE("addmm on CUDA: with fusion off, the composite agrees with the fused op", "[gpu][addmm]") {
  TR_REQUIRE_GPU();
  Generator gen(14);
  Tensor x = randn_as({32, 24}, DType::F32, gen).to(gpu()), w = randn_as({16, 24}, DType::F32, gen, 0.2).to(gpu()),
         b = randn_as({16}, DType::F32, gen).to(gpu()), gy = randn_as({32, 16}, DType::F32, gen).to(gpu());
  const Grads fused = run(true, x, w, b, gy);
  const Grads composite = test::unfused([&] { return run(true, x, w, b, gy); });
  check_near("y", composite.y.to(kCPU), fused.y, 1e-5, 1e-5);
  check_near("grad x", composite.gx.to(kCPU), fused.gx, 1e-5, 1e-5);
  check_near("grad w", composite.gw.to(kCPU), fused.gw, 1e-5, 1e-5);
  check_near("grad b", composite.gb.to(kCPU), fused.gb, 1e-5, 1e-5);
}

}  // namespace test_addmm_cuda
