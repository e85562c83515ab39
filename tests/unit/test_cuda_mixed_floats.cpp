// Binary ops on CUDA read f32 beside f16 / bf16 without a cast launch (OpDef::cuda_reads_mixed_floats):
// the same values as the CPU, which casts first, bit for bit, and the gradients in each input's dtype.
#include <catch2/catch.hpp>
#include "ops/ops.h"
#include "unit/require_gpu.h"

namespace test_cuda_mixed_floats {

using namespace tr;

TEST_CASE("cuda: binary ops on f32 beside bf16 / f16 equal the CPU's cast-then-op, gradients in each dtype", "[gpu]") {
  TR_REQUIRE_GPU();
  const Device cuda(DeviceType::CUDA, 0);
  manual_seed(11);
  for (DType low : {DType::BF16, DType::F16}) {
    const Tensor a = randn({3, 5}), b = cast(randn({5}), low);  // broadcast, and 16-bit on the right
    const std::vector<std::pair<const char*, Tensor (*)(const Tensor&, const Tensor&)>> ops = {
        {"add", [](const Tensor& x, const Tensor& y) { return x + y; }},
        {"sub", [](const Tensor& x, const Tensor& y) { return x - y; }},
        {"mul", [](const Tensor& x, const Tensor& y) { return x * y; }},
        {"div", [](const Tensor& x, const Tensor& y) { return x / y; }},
        {"maximum", [](const Tensor& x, const Tensor& y) { return maximum(x, y); }}};
    for (const auto& [name, f] : ops) {
      INFO(name << " with " << dtype_name(low));
      const Tensor got = f(a.to(cuda), b.to(cuda));
      CHECK(got.dtype() == DType::F32);
      CHECK(max(abs(got.to(kCPU) - f(a, b))).item() == 0.0);
      CHECK(max(abs(f(b.to(cuda), a.to(cuda)).to(kCPU) - f(b, a))).item() == 0.0);
    }
    // autograd: each input's gradient in its own dtype, as through the cast the CPU records
    Tensor x = a.to(cuda).requires_grad_(), y = b.to(cuda).requires_grad_();
    Tensor xc = a.clone().requires_grad_(), yc = b.clone().requires_grad_();
    sum(x * y + x).backward();
    sum(xc * yc + xc).backward();
    REQUIRE(y.grad().defined());
    CHECK(y.grad().dtype() == low);
    CHECK(x.grad().dtype() == DType::F32);
    CHECK(max(abs(cast(y.grad().to(kCPU), DType::F32) - cast(yc.grad(), DType::F32))).item() == 0.0);
    CHECK(max(abs(x.grad().to(kCPU) - xc.grad())).item() == 0.0);
  }
}

}  // namespace test_cuda_mixed_floats
