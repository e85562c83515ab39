// threshold_backward, relu's fused backward: values (the mask, broadcasting, NaN gradients under
// the mask give 0 as in torch), relu's gradient through it, and its gradcheck case.
#include <catch2/catch.hpp>
#include <cmath>
#include "op_cases.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace test_threshold_backward {

using namespace tr;
using namespace tr::test;

namespace {
Tensor vec(std::vector<double> v, DType t = DType::F32) {
  return from_vector(v, {int64_t(v.size())}, TensorOptions(t));
}
}  // namespace

TEST_CASE("threshold_backward: g where y > threshold, else 0", "[threshold_backward]") {
  Tensor g = vec({1, 2, 3, 4, NAN, INFINITY});
  Tensor y = vec({0.5, 0, -1, 2, 0, -3});
  std::vector<double> r = threshold_backward(g, y, 0.0).tolist();
  CHECK(r == std::vector<double>{1, 0, 0, 4, 0, 0});  // NaN / inf under the mask give 0
  CHECK(threshold_backward(g, y, 1.0).tolist() == std::vector<double>{0, 0, 0, 4, 0, 0});
  // y broadcasts against g; f64 and int64 run
  Tensor g2 = from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, TensorOptions(DType::F64));
  CHECK(threshold_backward(g2, vec({1, -1, 1}, DType::F64), 0.0).tolist() == std::vector<double>{1, 0, 3, 4, 0, 6});
  CHECK(threshold_backward(vec({5, 6}, DType::I64), vec({1, 0}, DType::I64), 0.0).tolist() ==
        std::vector<double>{5, 0});
}

TEST_CASE("threshold_backward: relu's gradient, including strided gradients", "[threshold_backward]") {
  Generator gen(3);
  Tensor x = randn({4, 6}, TensorOptions(DType::F32), &gen).requires_grad_(true);
  Tensor gy = randn({6, 4}, TensorOptions(DType::F32), &gen).transpose(0, 1);  // non-contiguous
  relu(x).backward(gy);
  CHECK(equal(x.grad(), gy * cast(x.detach() > 0.0, DType::F32)));
}

TR_OP_CASE("threshold_backward", "mask of a fixed output", ({randn64({3, 4}, 260)}), [](const Inputs& x) {
  Tensor y = randn64({3, 4}, 261, false).to(x[0].device());
  return Outputs{dispatch1("threshold_backward", {x[0], y}, {{"threshold", 0.1}})};
});

}  // namespace test_threshold_backward
