// Walks the op registry: every op has a CPU kernel (or is a view), a backward or an explicit
// non-differentiable mark, and differentiable ops have gradcheck cases; then runs every case.
#include <catch2/catch.hpp>
#include "unit/require_gpu.h"
#include <set>
#include "core/cuda_hooks.h"
#include "op_cases.h"
#include "ops/registry.h"

namespace test_op_registry {

using namespace tr;
using namespace tr::test;

TEST_CASE("every op has a CPU kernel, a backward or a non-differentiable mark, and a gradcheck case", "[registry]") {
  std::set<std::string> covered;
  for (auto& c : op_cases()) covered.insert(c.op);
  int n = 0;
  for (auto& [name, op] : OpRegistry::get().all()) {
    INFO("op: " << name);
    ++n;
    if (op.kind == OpKind::View)
      CHECK(op.view != nullptr);
    else
      CHECK(op.kernels[int(DeviceType::CPU)] != nullptr);
    CHECK((op.infer != nullptr || op.kind == OpKind::View));
    if (op.differentiable) {
      CHECK(op.backward != nullptr);
      CHECK(covered.count(name) == 1);
    }
  }
  CHECK(n >= 60);
  for (auto& c : op_cases()) {
    INFO("case for unknown op: " << c.op);
    CHECK(OpRegistry::get().all().count(c.op) == 1);
  }
}

namespace {
// gradcheck (and gradgradcheck where the case asks) of every registered case, its inputs on `dev`.
void gradcheck_cases(Device dev) {
  for (auto& c : op_cases()) {
    DYNAMIC_SECTION(c.op << ": " << c.name << " on " << dev.str()) {
      Inputs in;
      for (auto& t : c.make_inputs()) {
        Tensor d = t.detach().to(dev);
        in.push_back(t.requires_grad() ? d.requires_grad_(true) : d);
      }
      GradcheckResult r1 = gradcheck(c.fn, in);
      INFO("gradcheck " << c.op << " (" << c.name << ") on " << dev.str() << ": " << r1.message);
      CHECK(r1.ok);
      if (c.second_order) {
        GradcheckResult r2 = gradgradcheck(c.fn, in);
        INFO("gradgradcheck " << c.op << " (" << c.name << ") on " << dev.str() << ": " << r2.message);
        CHECK(r2.ok);
      }
    }
  }
}
}  // namespace

TEST_CASE("gradcheck and gradgradcheck of every registered case", "[gradcheck]") { gradcheck_cases(kCPU); }

TEST_CASE("gradcheck and gradgradcheck of every registered case on CUDA", "[gradcheck][gpu]") {
  TR_REQUIRE_GPU();
  gradcheck_cases(Device(DeviceType::CUDA, 0));
}

}  // namespace test_op_registry
