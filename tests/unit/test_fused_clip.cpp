// The fused clipping ops (ops/fused_clip.h) against the composite they replace: the CPU kernels,
// the CUDA kernels (in the emulation build, or on a GPU), and clip_grad_norm_tensor, which keeps
// the total norm on the device.
#include <catch2/catch.hpp>
#include <cmath>
#include "fusion_switch.h"
#include "ops/backends.h"
#include "ops/fused_clip.h"
#include "ops/ops.h"
#include "optim/clip_grad.h"
#include "unit/require_gpu.h"

namespace test_fused_clip {

using namespace tr;

namespace {

// gradients of several sizes; one spans more than one chunk of clip_math::kNormChunk elements
std::vector<Tensor> grads_of(DType t, uint64_t seed) {
  std::vector<Tensor> gs;
  for (int64_t n : {70001, 3, 1, 4096})
    gs.push_back(cast(randn({n}, TensorOptions(DType::F64)) * double(seed % 7 + 1), t));
  return gs;
}

// torch's clip_grad_norm_ total: the norm of the per-tensor norms
double composite_total(const std::vector<Tensor>& gs, double p) {
  std::vector<Tensor> norms;
  for (const Tensor& g : gs) norms.push_back(std::isinf(p) ? max(abs(g)) : norm(g, p));
  return (std::isinf(p) ? max(stack(norms)) : norm(stack(norms), p)).item();
}

std::vector<Tensor> to(const std::vector<Tensor>& gs, Device d) {
  std::vector<Tensor> r;
  for (const Tensor& g : gs) r.push_back(g.to(d).contiguous());
  return r;
}

}  // namespace

TEST_CASE("fused clip: the total norm and the scale equal the composite on the CPU", "[optim][clip][fused]") {
  manual_seed(3);
  for (double p : {2.0, 1.0, 3.0, double(INFINITY)}) {
    const std::vector<Tensor> gs = grads_of(DType::F64, 5);
    INFO("norm_type " << p);
    const Tensor total = fused_total_norm(gs, p);
    CHECK(total.dim() == 0);
    CHECK(total.item() == Approx(composite_total(gs, p)).epsilon(1e-12));
    std::vector<Tensor> before;
    for (const Tensor& g : gs) before.push_back(g.clone());
    fused_clip_scale_(gs, total, 0.5);
    const double coef = std::min(0.5 / (total.item() + 1e-6), 1.0);
    for (size_t i = 0; i < gs.size(); ++i) CHECK(max(abs(gs[i] - before[i] * coef)).item() < 1e-15);
  }
  // under max_norm the coefficient is 1: the gradients are unchanged
  const std::vector<Tensor> gs = grads_of(DType::F32, 2);
  const Tensor before = gs[0].clone();
  fused_clip_scale_(gs, fused_total_norm(gs, 2.0), 1e9);
  CHECK(max(abs(gs[0] - before)).item() == 0.0);
  // mixed dtypes or a strided tensor: not fusable (the composite runs)
  CHECK_FALSE(fusable_norm({gs[0], cast(gs[1], DType::F64)}));
  CHECK_FALSE(fusable_norm({randn({4, 4}).t()}));
  CHECK(fusable_norm(gs));
}

TEST_CASE("cuda: the fused clip kernels equal the CPU's composite", "[gpu]") {
  TR_REQUIRE_GPU();
  const Device cuda(DeviceType::CUDA, 0);
  manual_seed(4);
  for (DType t : {DType::F64, DType::F32, DType::BF16}) {
    for (double p : {2.0, 1.0, double(INFINITY)}) {
      INFO(dtype_name(t) << ", norm_type " << p);
      const std::vector<Tensor> cpu = grads_of(t, 3), dev = to(cpu, cuda);
      const double want = composite_total(cpu, p);
      const Tensor total = fused_total_norm(dev, p);
      CHECK(total.device() == cuda);
      CHECK(total.dtype() == t);
      const double tol = t == DType::F64 ? 1e-12 : t == DType::F32 ? 1e-6 : 1e-2;
      CHECK(total.item() == Approx(want).epsilon(tol));
      fused_clip_scale_(dev, total, 0.25);
      const double coef = std::min(0.25 / (total.item() + 1e-6), 1.0);
      for (size_t i = 0; i < cpu.size(); ++i) {
        const Tensor want_g = cast(cast(cpu[i], DType::F64) * coef, DType::F64);
        CHECK(max(abs(cast(dev[i].to(kCPU), DType::F64) - want_g)).item() <= tol * (1 + max(abs(want_g)).item()));
      }
    }
  }
}

TEST_CASE("cuda: clip_grad_norm_tensor keeps the norm on the device and clips as clip_grad_norm", "[gpu]") {
  TR_REQUIRE_GPU();
  const Device cuda(DeviceType::CUDA, 0);
  manual_seed(5);
  std::vector<Tensor> cpu_params, dev_params;
  for (int64_t n : {70001, 17, 1}) {
    Tensor p = randn({n}, TensorOptions(DType::F64));
    Tensor q = p.to(cuda);
    p.requires_grad_();
    q.requires_grad_();
    const Tensor g = randn({n}, TensorOptions(DType::F64)) * 3.0;
    p.set_grad(g.clone());
    q.set_grad(g.to(cuda));
    cpu_params.push_back(p);
    dev_params.push_back(q);
  }
  for (bool fused : {true, false}) {
    INFO("fused_ops " << fused);
    test::FusionSwitch s(fused);
    std::vector<Tensor> cp, dp;
    for (size_t i = 0; i < cpu_params.size(); ++i) {
      cp.push_back(cpu_params[i].detach().clone().requires_grad_());
      dp.push_back(dev_params[i].detach().clone().requires_grad_());
      cp.back().set_grad(cpu_params[i].grad().clone());
      dp.back().set_grad(dev_params[i].grad().clone());
    }
    const double want = optim::clip_grad_norm(cp, 1.0);
    const Tensor got = optim::clip_grad_norm_tensor(dp, 1.0);
    CHECK(got.device() == cuda);
    CHECK(got.item() == Approx(want).epsilon(1e-12));
    for (size_t i = 0; i < cp.size(); ++i) CHECK(max(abs(dp[i].grad().to(kCPU) - cp[i].grad())).item() < 1e-12);
  }
  CHECK_FALSE(optim::clip_grad_norm_tensor({randn({2})}, 1.0).defined());  // no gradients
}

}  // namespace test_fused_clip
