// linear and linear_relu through the fused addmm / addmm_relu (the bias, and the relu, in the
// product's epilogue) against the composite matmul + add (+ relu) they replace (fusion off): f32 bit
// for bit on oneDNN's primitive (few rows) and on sgemm (many rows), 2-D and 3-D inputs, values and
// gradients; bf16 within one rounding; Sequential's Linear + ReLU pairing and its hook exception;
// NaN through the relu; the gradcheck cases.
#include <catch2/catch.hpp>
#include <cmath>
#include "autograd/node.h"
#include "fusion_switch.h"
#include "nn/layers/linear.h"
#include "nn/layers/relu.h"
#include "nn/layers/sequential.h"
#include "op_cases.h"
#include "ops/autocast.h"
#include "ops/backends.h"
#include "ops/cpu/gemm_bf16.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace test_addmm {

using namespace tr;
using namespace tr::test;

namespace {

struct Run {
  Tensor y, gx, gw, gb;
};

// y = linear(_relu)(x, w, b) and the gradients of sum(y * gy), with fusion as given
Run run_linear(bool fused, bool relu, const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& gy) {
  FusionSwitch s(fused);
  Tensor x = x0.detach().requires_grad_(true), w = w0.detach().requires_grad_(true),
         b = b0.detach().requires_grad_(true);
  Run r;
  r.y = relu ? linear_relu(x, w, b) : linear(x, w, b);
  r.y.backward(gy);
  r.gx = x.grad();
  r.gw = w.grad();
  r.gb = b.grad();
  return r;
}

}  // namespace

TEST_CASE("linear and linear_relu: the fused addmm equals the composite, f32 bit for bit", "[addmm]") {
  Generator gen(3);
  // rows: 1, the MLP's 128 (oneDNN's primitive), 300 (sgemm); columns with and without a 16-tail
  struct Case {
    Shape x;
    int64_t out;
  };
  for (const Case& c :
       {Case{{1, 7}, 5}, Case{{128, 784}, 512}, Case{{128, 512}, 10}, Case{{300, 33}, 17}, Case{{2, 64, 48}, 144}}) {
    for (bool relu : {false, true}) {
      INFO("x " << str(c.x) << " out " << c.out << (relu ? " relu" : ""));
      Tensor x = randn(c.x, DType::F32, &gen), w = randn({c.out, c.x.back()}, DType::F32, &gen) * 0.1,
             b = randn({c.out}, DType::F32, &gen);
      Shape ys = c.x;
      ys.back() = c.out;
      Tensor gy = randn(ys, DType::F32, &gen);
      Run ref = run_linear(false, relu, x, w, b, gy), got = run_linear(true, relu, x, w, b, gy);
      CHECK(got.y.sizes() == ys);
      CHECK(equal(got.y, ref.y));
      CHECK(equal(got.gx, ref.gx));
      CHECK(equal(got.gw, ref.gw));
      CHECK(equal(got.gb, ref.gb));
    }
  }
}

TEST_CASE("linear_relu: the fused op is the one taken, and NaN passes the relu as torch's", "[addmm]") {
  Tensor x = from_vector({1, 2, -2, 3}, {2, 2}), w = from_vector({1, 0, 0, 1}, {2, 2}), b = from_vector({0, NAN}, {2});
  Tensor xr = x.detach().requires_grad_(true);
  Tensor y = linear_relu(xr, w, b);
  CHECK(grad_fn_name(y) == "AddmmActivationBackward0");
  // relu((1, 2 + NaN)) = (1, NaN); relu((-2, 3 + NaN)) = (0, NaN)
  std::vector<double> v = y.tolist();
  CHECK(v[0] == 1.0);
  CHECK(std::isnan(v[1]));
  CHECK(v[2] == 0.0);
  CHECK(std::isnan(v[3]));
  CHECK(grad_fn_name(linear(x, w, b)) == "");
  CHECK(grad_fn_name(linear(xr, w, b)) == "AddmmBackward0");
}

TEST_CASE("linear and linear_relu in bf16: fused within one rounding of the composite", "[addmm]") {
  Generator gen(4);
  for (int64_t rows : {16, 300}) {
    Tensor x = randn({rows, 96}, DType::F32, &gen).to(DType::BF16),
           w = (randn({40, 96}, DType::F32, &gen) * 0.1).to(DType::BF16),
           b = randn({40}, DType::F32, &gen).to(DType::BF16);
    Tensor gy = randn({rows, 40}, DType::F32, &gen).to(DType::BF16);
    for (bool relu : {false, true}) {
      INFO("rows " << rows << (relu ? " relu" : ""));
      Run ref = run_linear(false, relu, x, w, b, gy), got = run_linear(true, relu, x, w, b, gy);
      // the fused bias is added to the f32 sum before its one rounding; the composite rounds twice
      CHECK(allclose(got.y.to(DType::F32), ref.y.to(DType::F32), 1.6e-2, 1e-2));
      // the relu's mask is the fused output's: a value that rounds to 0 in the composite may not
      const Tensor g = relu ? gy.to(DType::F32) * (got.y > 0.0).to(DType::F32) : gy.to(DType::F32);
      CHECK(allclose(got.gb.to(DType::F32), g.sum({0}), 3e-2, 3e-2));
      if (!relu) CHECK(allclose(got.gb.to(DType::F32), ref.gb.to(DType::F32), 3e-2, 3e-2));
    }
  }
  // under bf16 autocast, f32 arguments: the same as the composite under autocast
  Tensor x = randn({8, 32}, DType::F32, &gen), w = randn({16, 32}, DType::F32, &gen) * 0.2,
         b = randn({16}, DType::F32, &gen);
  Tensor ref, got;
  {
    amp::AutocastGuard g(DeviceType::CPU, DType::BF16);
    ref = unfused([&] { return linear_relu(x, w, b); });
    got = linear_relu(x, w, b);
  }
  CHECK(got.dtype() == DType::BF16);
  CHECK(allclose(got.to(DType::F32), ref.to(DType::F32), 1.6e-2, 1e-2));
}

TEST_CASE("linear and linear_relu in bf16 on the widened path: the composite's roundings, bit for bit", "[addmm]") {
  // f32 products of widened copies (no native bf16 kernel): the bias and the relu are applied as a
  // row is rounded, bf16(relu(bf16(bf16(a b) + b))), which are the composite's three roundings
  if (cpu::bf16_gemm_kernel() != cpu::Bf16Gemm::F32) {
    WARN("skipped: bf16 products run on a native bf16 kernel on this CPU, not on widened f32 copies");
    return;
  }
  Generator gen(5);
  for (int64_t rows : {16, 128, 300}) {
    Tensor x = randn({rows, 96}, DType::F32, &gen).to(DType::BF16),
           w = (randn({43, 96}, DType::F32, &gen) * 0.1).to(DType::BF16),
           b = randn({43}, DType::F32, &gen).to(DType::BF16);
    b.data_ptr<BFloat16>()[5] = BFloat16(NAN);
    Tensor gy = randn({rows, 43}, DType::F32, &gen).to(DType::BF16);
    for (bool relu : {false, true}) {
      INFO("rows " << rows << (relu ? " relu" : ""));
      Run ref = run_linear(false, relu, x, w, b, gy), got = run_linear(true, relu, x, w, b, gy);
      const Tensor nan = isnan(got.y);
      CHECK(equal(nan, isnan(ref.y)));
      CHECK(nan.to(DType::F32).sum().item() == double(rows));
      CHECK(equal(where(nan, zeros({}, DType::BF16), got.y), where(nan, zeros({}, DType::BF16), ref.y)));
      if (relu) CHECK((got.y < 0.0).to(DType::F32).sum().item() == 0.0);
      CHECK(equal(got.gx, ref.gx));
      CHECK(equal(got.gw, ref.gw));
    }
  }
}

TEST_CASE("Sequential runs Linear + ReLU as linear_relu, unless a hook needs the linear's output", "[addmm][layers]") {
  Generator gen(5);
  auto lin = std::make_shared<nn::Linear>(6, 4);
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(lin).push_back(std::make_shared<nn::ReLU>());
  Tensor x = randn({3, 6}, DType::F32, &gen);
  Tensor fused = (*seq)(x);
  CHECK(equal(fused, relu(linear(x, lin->weight, lin->bias))));
  CHECK(grad_fn_name(fused) == "AddmmActivationBackward0");
  Tensor seen;
  lin->register_forward_hook([&](nn::Module&, const std::vector<Tensor>&, const Tensor& out) {
    seen = out;
    return Tensor();
  });
  Tensor hooked = (*seq)(x);
  CHECK(equal(hooked, fused));
  REQUIRE(seen.defined());
  CHECK(equal(seen, linear(x, lin->weight, lin->bias)));
  CHECK(grad_fn_name(hooked) == "ReluBackward0");
}

TEST_CASE("addmm: argument checks", "[addmm]") {
  CHECK_THROWS_WITH(dispatch1("addmm", {randn({3}), randn({2, 4}), randn({4, 5})}),
                    Catch::Contains("bias of shape [5]"));
  CHECK_THROWS_WITH(dispatch1("addmm", {randn({5}), randn({2, 4}), randn({3, 5})}),
                    Catch::Contains("cannot be multiplied"));
}

TR_OP_CASE("addmm", "linear", ({randn64({3, 4}, 280), randn64({5, 4}, 281), randn64({5}, 282)}),
           [](const Inputs& x) { return Outputs{linear(x[0], x[1], x[2])}; });
TR_OP_CASE("addmm", "linear over [B, T, C]", ({randn64({2, 3, 4}, 283), randn64({5, 4}, 284), randn64({5}, 285)}),
           [](const Inputs& x) { return Outputs{linear(x[0], x[1], x[2])}; });
TR_OP_CASE("addmm_relu", "linear_relu", ({randn64({4, 3}, 286), randn64({6, 3}, 287), randn64({6}, 288)}),
           [](const Inputs& x) { return Outputs{linear_relu(x[0], x[1], x[2])}; });

}  // namespace test_addmm
