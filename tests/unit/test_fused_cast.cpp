// _fused_cast (ops/fused_cast.h) and autocast's precast_parameters, which casts a region's
// parameters with it: the same values and gradients as one cast per parameter at its first use.
#include <catch2/catch.hpp>
#include "ops/autocast.h"
#include "ops/fused_cast.h"
#include "ops/ops.h"
#include "op_cases.h"
#include "unit/require_gpu.h"

namespace test_fused_cast {

using namespace tr;
using namespace tr::test;

// the backward's plumbing through several outputs, in f64 (a cast to f64 is the identity)
TR_OP_CASE("_fused_cast", "two tensors", ({randn64({2, 3}, 41), randn64({4}, 42)}), [](const Inputs& x) {
  return fused_cast({x[0], x[1]}, DType::F64);
});

namespace {

void check_fused_cast(Device dev) {
  manual_seed(7);
  const std::vector<Tensor> src = {randn({70001}).to(dev), cast(randn({3, 5}), DType::BF16).to(dev),
                                   randn({2, 2}).t().to(dev)};  // a strided one
  for (DType to : {DType::BF16, DType::F16, DType::F32}) {
    INFO("to " << dtype_name(to) << " on " << dev.str());
    const std::vector<Tensor> got = fused_cast(src, to);
    REQUIRE(got.size() == src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      CHECK(got[i].dtype() == to);
      CHECK(got[i].sizes() == src[i].sizes());
      CHECK(max(abs(cast(got[i], DType::F64) - cast(cast(src[i], to), DType::F64))).to(kCPU).item() == 0.0);
    }
  }
}

// y = sum(linear(x, w, b)) under autocast with or without the precast: outputs and gradients
std::vector<Tensor> linear_step(Device dev, bool precast) {
  manual_seed(8);
  Tensor w = randn({6, 4}).to(dev).requires_grad_(), b = randn({6}).to(dev).requires_grad_();
  const Tensor x = randn({5, 4}).to(dev);
  Tensor y;
  {
    amp::AutocastGuard g(dev.type, DType::BF16, true);
    if (precast) {
      amp::precast_parameters({w, b});
      CHECK(amp::autocast_cache_size() == 2);
    }
    y = linear(x, w, b);
    CHECK(amp::cast_parameters().size() == 2);
  }
  sum(cast(y, DType::F32)).backward();
  return {y, w.grad(), b.grad()};
}

}  // namespace

TEST_CASE("_fused_cast: each tensor as cast() makes it, on the CPU", "[fused][cast]") { check_fused_cast(kCPU); }

TEST_CASE("autocast: precast_parameters gives the values and gradients of casts at first use", "[autocast][fused]") {
  const std::vector<Tensor> a = linear_step(kCPU, false), b = linear_step(kCPU, true);
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].dtype() == b[i].dtype());
    CHECK(max(abs(cast(a[i], DType::F64) - cast(b[i], DType::F64))).item() == 0.0);
  }
}

TEST_CASE("cuda: _fused_cast and precast_parameters equal the CPU's casts", "[gpu]") {
  TR_REQUIRE_GPU();
  const Device cuda(DeviceType::CUDA, 0);
  check_fused_cast(cuda);
  const std::vector<Tensor> a = linear_step(kCPU, false), b = linear_step(cuda, true);
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(max(abs(cast(a[i], DType::F64) - cast(b[i].to(kCPU), DType::F64))).item() <=
          1e-2 * (1 + max(abs(cast(a[i], DType::F64))).item()));
  const std::vector<Tensor> c = linear_step(cuda, false);
  for (size_t i = 0; i < c.size(); ++i)  // on one device, with and without: bit for bit
    CHECK(max(abs(cast(c[i], DType::F64) - cast(b[i], DType::F64))).to(kCPU).item() == 0.0);
}

}  // namespace test_fused_cast
