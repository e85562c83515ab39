// any_non_finite (the fused CPU pass and the composite it replaces elsewhere) and NonFiniteOpCheck,
// the forensic mode that names the first op making an inf or a NaN from finite inputs.
#include <catch2/catch.hpp>
#include <cmath>
#include "ops/ops.h"
#include "ops/registry.h"

namespace test_non_finite {

using namespace tr;
using Catch::Matchers::Contains;

TEST_CASE("any_non_finite: an inf or NaN anywhere in any tensor, of any floating dtype", "[nonfinite]") {
  Generator gen(3);
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    INFO(dtype_name(t));
    std::vector<Tensor> ts{randn({100000}, TensorOptions(t), &gen) * 1e4, randn({7, 3}, TensorOptions(t), &gen),
                           Tensor(), empty({0}, TensorOptions(t))};
    CHECK(any_non_finite(ts).item() == 0);
    for (double bad : {double(NAN), double(INFINITY), -double(INFINITY)})
      for (int64_t at : {int64_t(0), int64_t(65537), int64_t(99999)}) {
        Tensor a = ts[0].clone();
        a.select(0, at).fill_(bad);
        CHECK(any_non_finite({ts[1], a}).item() != 0);
      }
    Tensor b = ts[1].clone();
    b.select(0, 6).select(0, 2).fill_(NAN);
    CHECK(any_non_finite({ts[0], b}).item() != 0);
  }
  // the largest finite f32 values stay finite
  CHECK(any_non_finite({full({1000}, 3.4e38, TensorOptions(DType::F32))}).item() == 0);
  CHECK(any_non_finite({}).item() == 0);
}

TEST_CASE("NonFiniteOpCheck: the first op that makes an inf or NaN from finite inputs throws, naming it",
          "[nonfinite]") {
  Tensor x = from_vector({1.0, 2.0, 1e30}, {3});
  NonFiniteOpCheck::set_enabled(true);
  try {
    Tensor y = x * 2.0;  // finite
    CHECK_THROWS_WITH(y * y * y, Contains("op 'mul' made an inf or NaN from finite inputs"));
    try {
      Tensor z = exp(x);
      FAIL("no throw");
    } catch (const NonFiniteOpError& e) { CHECK(e.op() == "exp"); }
    // an op whose inputs are already non-finite passes the blame on
    Tensor inf = from_vector({INFINITY}, {1});
    CHECK_NOTHROW(inf + 1.0);
  } catch (...) {
    NonFiniteOpCheck::set_enabled(false);
    throw;
  }
  NonFiniteOpCheck::set_enabled(false);
  CHECK_NOTHROW(exp(x));
}

}  // namespace test_non_finite
