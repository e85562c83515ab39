// Walks the op registry: every op has a CPU kernel (or is a view), a backward or an explicit
// non-differentiable mark, and differentiable ops have gradcheck cases; then runs every case.
#include <catch2/catch.hpp>
#include <set>
#include "core/cuda_hooks.h"
#include "op_cases.h"
#include "ops/registry.h"

using namespace tr;
using namespace tr::test;

TEST_CASE("every op has a CPU kernel, a backward or a non-differentiable mark, and a gradcheck case", "[registry]") {
  std::set<std::string> covered;
  for (auto& c : op_cases()) covered.insert(c.op);
  int n = 0;
  for (auto& [name, op] : OpRegistry::get().all()) {
    INFO("op: " << name);
    ++n;
    if (op.kind == OpKind::View) CHECK(op.view != nullptr);
    else CHECK(op.kernels[int(DeviceType::CPU)] != nullptr);
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

TEST_CASE("gradcheck and gradgradcheck of every registered case", "[gradcheck]") {
  for (auto& c : op_cases()) {
    DYNAMIC_SECTION(c.op << ": " << c.name) {
      Inputs in = c.make_inputs();
      GradcheckResult r1 = gradcheck(c.fn, in);
      INFO("gradcheck " << c.op << " (" << c.name << "): " << r1.message);
      CHECK(r1.ok);
      if (c.second_order) {
        GradcheckResult r2 = gradgradcheck(c.fn, in);
        INFO("gradgradcheck " << c.op << " (" << c.name << "): " << r2.message);
        CHECK(r2.ok);
      }
    }
  }
}

TEST_CASE("gradcheck and gradgradcheck of every registered case on CUDA", "[gradcheck][gpu]") {
  if (cuda::device_count() == 0) {
    WARN("no CUDA device: " << cuda::unavailable_reason());
    return;
  }
  const Device gpu(DeviceType::CUDA, 0);
  for (auto& c : op_cases()) {
    DYNAMIC_SECTION(c.op << ": " << c.name << " on cuda:0") {
      Inputs in;
      for (auto& t : c.make_inputs()) {
        Tensor g = t.detach().to(gpu);
        in.push_back(t.requires_grad() ? g.requires_grad_(true) : g);
      }
      GradcheckResult r1 = gradcheck(c.fn, in);
      INFO("gradcheck " << c.op << " (" << c.name << ") on cuda:0: " << r1.message);
      CHECK(r1.ok);
      if (c.second_order) {
        GradcheckResult r2 = gradgradcheck(c.fn, in);
        INFO("gradgradcheck " << c.op << " (" << c.name << ") on cuda:0: " << r2.message);
        CHECK(r2.ok);
      }
    }
  }
}
