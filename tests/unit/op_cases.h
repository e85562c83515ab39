// Gradcheck cases keyed by op name. Every differentiable op in the registry must have at least
// one case (test_op_registry.cpp walks the registry); each case runs gradcheck and gradgradcheck
// in f64.  Add one with:
//   TR_OP_CASE("mul", "broadcast", ({ randn64({2, 3}), randn64({3}) }),
//              [](const Inputs& x) { return Outputs{tr::mul(x[0], x[1])}; });
#pragma once
#include <functional>
#include <string>
#include <vector>
#include "autograd/gradcheck.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "ops/ops.h"

namespace tr::test {

using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;

struct OpCase {
  std::string op;    // registry name the case covers
  std::string name;  // what the case exercises
  std::function<Inputs()> make_inputs;
  std::function<Outputs(const Inputs&)> fn;
  bool second_order = true;  // also run gradgradcheck
};

std::vector<OpCase>& op_cases();

struct OpCaseRegistrar {
  explicit OpCaseRegistrar(OpCase c) { op_cases().push_back(std::move(c)); }
};

// A fresh f64 tensor requiring grad, drawn from a fixed generator per call site.
Tensor randn64(const Shape& s, uint64_t seed = 7, bool requires_grad = true);
// Uniform in [lo, hi) (e.g. positive inputs for log/sqrt), f64, requires grad.
Tensor uniform64(const Shape& s, double lo, double hi, uint64_t seed = 11, bool requires_grad = true);

}  // namespace tr::test

#define TR_OP_CASE_CAT2(a, b) a##b
#define TR_OP_CASE_CAT(a, b) TR_OP_CASE_CAT2(a, b)
// TR_OP_CASE(op, name, inputs-lambda-body-expression, fn)
#define TR_OP_CASE(OP, NAME, MAKE, FN)               \
  static ::tr::test::OpCaseRegistrar TR_OP_CASE_CAT( \
      tr_op_case_, __LINE__)(::tr::test::OpCase{OP, NAME, [] { return ::tr::test::Inputs MAKE; }, FN})
#define TR_OP_CASE_FIRST_ORDER(OP, NAME, MAKE, FN)   \
  static ::tr::test::OpCaseRegistrar TR_OP_CASE_CAT( \
      tr_op_case_, __LINE__)(::tr::test::OpCase{OP, NAME, [] { return ::tr::test::Inputs MAKE; }, FN, false})
