// Fused backward kernels against their composite specs (backends::fusion() off runs the chain of
// ops each replaces): gelu_backward in both forms and softmax_backward, on the vector path
// (contiguous f32, lengths with and without a tail: bit for bit where the composite rounds the
// same way), strided and f64 inputs; and their gradcheck cases.
#include <catch2/catch.hpp>
#include <cmath>
#include "fusion_switch.h"
#include "op_cases.h"
#include "ops/backends.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace test_fused_backward {

using namespace tr;
using namespace tr::test;

namespace {}  // namespace

TEST_CASE("gelu_backward: the fused kernel equals the composite formula", "[fused]") {
  Generator gen(7);
  for (const char* approx : {"none", "tanh"}) {
    for (int64_t n : {1, 8, 13, 4099}) {
      Tensor x = randn({n}, TensorOptions(DType::F32), &gen) * 3.0;
      Tensor g = randn({n}, TensorOptions(DType::F32), &gen);
      auto [ref, got] = unfused_and_fused([&] { return gelu_backward(g, x, approx); });
      INFO(approx << " n=" << n);
      // erf form bit for bit: the same lane functions, products and sums rounded in the same order
      if (std::string(approx) == "none")
        CHECK(equal(got, ref));
      else
        CHECK(allclose(got, ref, 2e-6, 1e-6));
    }
    // strided gradient, broadcast x, f64: the scalar loop
    Tensor x = randn({6, 5}, TensorOptions(DType::F64), &gen);
    Tensor g = randn({5, 6}, TensorOptions(DType::F64), &gen).transpose(0, 1);
    auto [ref, got] = unfused_and_fused([&] { return gelu_backward(g, x, approx); });
    CHECK(allclose(got, ref, 1e-12, 1e-12));
    Tensor xb = randn({5}, TensorOptions(DType::F32), &gen);
    auto [rb, gb] = unfused_and_fused([&] { return gelu_backward(g.to(DType::F32), xb, approx); });
    CHECK(allclose(gb, rb, 2e-6, 1e-6));
  }
}

TEST_CASE("gelu_backward: special values as torch's", "[fused]") {
  // gelu'(0) = 0.5; at +-inf torch 1.13 gives NaN (inf * pdf = inf * 0), both forms; NaN propagates
  Tensor x = from_vector({0.0, INFINITY, -INFINITY, NAN, -10.0}, {5}, TensorOptions(DType::F32));
  Tensor g = ones({5}, TensorOptions(DType::F32));
  for (const char* approx : {"none", "tanh"}) {
    INFO(approx);
    std::vector<double> r = gelu_backward(g, x, approx).tolist();
    CHECK(r[0] == 0.5);
    CHECK(std::isnan(r[1]));
    CHECK(std::isnan(r[2]));
    CHECK(std::isnan(r[3]));
    CHECK(std::abs(r[4]) < 1e-20);
  }
}

TR_OP_CASE("gelu_backward", "erf", ({randn64({3, 4}, 270), randn64({3, 4}, 271)}),
           [](const Inputs& x) { return Outputs{gelu_backward(x[0], x[1], "none")}; });
TR_OP_CASE("gelu_backward", "tanh, broadcast x", ({randn64({3, 4}, 272), randn64({4}, 273)}),
           [](const Inputs& x) { return Outputs{gelu_backward(x[0], x[1], "tanh")}; });

TEST_CASE("softmax_backward: the fused kernel equals the composite formula", "[fused]") {
  Generator gen(11);
  for (bool log : {false, true}) {
    for (int64_t n : {1, 8, 13, 130}) {
      Tensor x = randn({3, n}, TensorOptions(DType::F32), &gen);
      Tensor y = log ? log_softmax(x, 1) : softmax(x, 1);
      Tensor g = randn({3, n}, TensorOptions(DType::F32), &gen);
      auto [ref, got] = unfused_and_fused([&] { return softmax_backward(g, y, 1, log); });
      INFO("log=" << log << " n=" << n);
      CHECK(allclose(got, ref, 1e-5, 1e-6));  // the row sums: 8 float lanes vs the sum op's double
      // cross-entropy's gradient (one non-zero per row, so both sums are exact): bit for bit
      Tensor onehot = zeros({3, n}, TensorOptions(DType::F32));
      onehot.select(1, n - 1).fill_(-1.0 / 3);
      auto [ref1, got1] = unfused_and_fused([&] { return softmax_backward(onehot, y, 1, log); });
      CHECK(equal(got1, ref1));
    }
    // along a middle dim, f64, a strided gradient
    Tensor x = randn({4, 5, 6}, TensorOptions(DType::F64), &gen);
    Tensor y = log ? log_softmax(x, 1) : softmax(x, 1);
    Tensor g = randn({6, 5, 4}, TensorOptions(DType::F64), &gen).permute({2, 1, 0});
    auto [ref, got] = unfused_and_fused([&] { return softmax_backward(g, y, 1, log); });
    CHECK(allclose(got, ref, 1e-12, 1e-12));
  }
}

TEST_CASE("softmax_backward: softmax's and log_softmax's gradients through it", "[fused]") {
  Tensor x = from_vector({1.0, 2.0, 3.0}, {3}, TensorOptions(DType::F64)).requires_grad_(true);
  Tensor w = from_vector({1.0, 0.0, -1.0}, {3}, TensorOptions(DType::F64));
  (softmax(x, 0) * w).sum().backward();
  // d/dx_j sum_i w_i y_i = y_j (w_j - sum_i w_i y_i)
  std::vector<double> y = softmax(x.detach(), 0).tolist(), gx = x.grad().tolist();
  const double s = y[0] - y[2];
  for (int j = 0; j < 3; ++j)
    CHECK(gx[size_t(j)] == Approx(y[size_t(j)] * ((j == 0 ? 1.0 : j == 1 ? 0.0 : -1.0) - s)).epsilon(1e-14));
}

TR_OP_CASE("softmax_backward", "softmax, last dim", ({randn64({3, 5}, 280), randn64({3, 5}, 281)}),
           [](const Inputs& x) { return Outputs{softmax_backward(x[0], softmax(x[1], 1), 1, false)}; });
TR_OP_CASE("softmax_backward", "log_softmax, dim 0", ({randn64({4, 3}, 282), randn64({4, 3}, 283)}),
           [](const Inputs& x) { return Outputs{softmax_backward(x[0], log_softmax(x[1], 0), 0, true)}; });

}  // namespace test_fused_backward
