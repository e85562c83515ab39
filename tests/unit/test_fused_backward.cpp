// Fused backward kernels against their composite specs (backends::fusion() off runs the chain of
// ops each replaces): gelu_backward in both forms, on the vector path (contiguous f32, lengths
// with and without a tail), strided and f64 inputs; and their gradcheck cases.
#include <catch2/catch.hpp>
#include <cmath>
#include "op_cases.h"
#include "ops/backends.h"
#include "ops/ops.h"
#include "ops/registry.h"

using namespace tr;
using namespace tr::test;

namespace {

// Runs f with fusion off, then on, and returns both results.
template <typename F>
std::pair<Tensor, Tensor> unfused_and_fused(const F& f) {
  backends::fusion().enabled = false;
  Tensor a;
  try {
    a = f();
  } catch (...) {
    backends::fusion().enabled = true;
    throw;
  }
  backends::fusion().enabled = true;
  return {a, f()};
}

}  // namespace

TEST_CASE("gelu_backward: the fused kernel equals the composite formula", "[fused]") {
  Generator gen(7);
  for (const char* approx : {"none", "tanh"}) {
    for (int64_t n : {1, 8, 13, 4099}) {
      Tensor x = randn({n}, TensorOptions(DType::F32), &gen) * 3.0;
      Tensor g = randn({n}, TensorOptions(DType::F32), &gen);
      auto [ref, got] = unfused_and_fused([&] { return gelu_backward(g, x, approx); });
      INFO(approx << " n=" << n);
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
