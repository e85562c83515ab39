// Tensor core: dtypes (f16/bf16 rounding), strided views sharing storage, broadcasting, type
// promotion, factories, the RNG, and the errors of misuse.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include "core/cuda_hooks.h"
#include "core/half.h"
#include "ops/init.h"
#include "ops/ops.h"

namespace test_tensor {

using namespace tr;
using Catch::Matchers::Contains;

namespace {
std::vector<double> vals(const Tensor& t) { return t.tolist(); }
}  // namespace

TEST_CASE("f16 conversion rounds to nearest even, handles subnormals, overflow and NaN", "[tensor][dtype]") {
  CHECK(float_to_half_bits(1.0f) == 0x3c00);
  CHECK(float_to_half_bits(-2.0f) == 0xc000);
  CHECK(float_to_half_bits(65504.0f) == 0x7bff);                          // max finite
  CHECK(float_to_half_bits(65519.99f) == 0x7bff);                         // below the rounding boundary
  CHECK(float_to_half_bits(65520.0f) == 0x7c00);                          // rounds to inf
  CHECK(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);      // tie -> even (down)
  CHECK(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);  // tie -> even (up)
  CHECK(float_to_half_bits(std::ldexp(1.0f, -24)) == 0x0001);             // smallest subnormal
  CHECK(float_to_half_bits(std::ldexp(1.0f, -25)) == 0x0000);             // tie -> even (zero)
  CHECK(float_to_half_bits(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(float_to_half_bits(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
  CHECK((float_to_half_bits(std::numeric_limits<float>::quiet_NaN()) & 0x7fff) > 0x7c00);
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite half round-trips exactly
    float f = half_bits_to_float(uint16_t(h));
    REQUIRE(float_to_half_bits(f) == h);
  }
}

TEST_CASE("bf16 conversion rounds to nearest even", "[tensor][dtype]") {
  CHECK(float_to_bf16_bits(1.0f) == 0x3f80);
  CHECK(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);      // tie -> even
  CHECK(float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);  // tie -> even (up)
  CHECK(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -7)) == 0x3f81);      // exact
  CHECK(bf16_bits_to_float(0x3f81) == 1.0f + std::ldexp(1.0f, -7));
  CHECK((float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()) & 0x7fff) > 0x7f80);
  CHECK(float_to_bf16_bits(3.4e38f) == 0x7f80);  // rounds past max to inf
}

TEST_CASE("every dtype converts through cast and back", "[tensor][dtype]") {
  Tensor x = tensor({0, 1, 2, 3, 250});
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8}) {
    INFO(dtype_name(t));
    Tensor y = x.to(t);
    CHECK(y.dtype() == t);
    CHECK(vals(y) == std::vector<double>{0, 1, 2, 3, 250});
  }
  CHECK(vals(x.to(DType::Bool)) == std::vector<double>{0, 1, 1, 1, 1});
  CHECK(vals(tensor({2.5, -1.7}).to(DType::I64)) == std::vector<double>{2, -1});  // truncation, as torch
  CHECK(dtype_from_name("bf16") == DType::BF16);
  CHECK_THROWS_WITH(dtype_from_name("float8"), Contains("unknown dtype 'float8'"));
}

TEST_CASE("type promotion follows torch.result_type", "[tensor][dtype]") {
  Tensor f = ones({2}), d = ones({2}, DType::F64), i = ones({2}, DType::I64), h = ones({2}, DType::F16);
  CHECK((f + d).dtype() == DType::F64);
  CHECK((i + f).dtype() == DType::F32);
  CHECK((i + 2.5).dtype() == DType::F32);  // wrapped float with an integer tensor: default float
  CHECK((f * 2.0).dtype() == DType::F32);  // wrapped number does not widen f32
  CHECK((h + 1.0).dtype() == DType::F16);
  CHECK((h + f).dtype() == DType::F32);
  CHECK((f + scalar_tensor(1.0, DType::F64)).dtype() == DType::F32);  // 0-dim is weaker than dimensioned
  CHECK((i / i).dtype() == DType::F32);                               // true division
  CHECK((i > 0.5).dtype() == DType::Bool);
  CHECK(exp(i).dtype() == DType::F32);
}

TEST_CASE("views share storage and the version counter", "[tensor][views]") {
  Tensor x = arange(0.0, 12.0, 1.0, DType::F32).view({3, 4});
  Tensor v = x.view({4, 3});
  Tensor s = x.select(0, 1);
  Tensor n = x.narrow(1, 1, 2);
  CHECK(v.storage() == x.storage());
  CHECK(s.storage() == x.storage());
  CHECK(vals(s) == std::vector<double>{4, 5, 6, 7});
  CHECK(vals(n) == std::vector<double>{1, 2, 5, 6, 9, 10});
  CHECK_FALSE(n.is_contiguous());
  s.fill_(-1);
  CHECK(vals(x.select(0, 1)) == std::vector<double>{-1, -1, -1, -1});
  CHECK(x.version() == s.version());
  CHECK(x.version() >= 1);
  Tensor t = x.t();
  CHECK(t.sizes() == Shape{4, 3});
  CHECK(t.strides() == Shape{1, 4});
  CHECK(x.slice(1, 0, 4, 2).sizes() == Shape{3, 2});
  CHECK(vals(x.slice(1, 1, 4, 2)) == std::vector<double>{1, 3, -1, -1, 9, 11});
  CHECK(x.unsqueeze(0).sizes() == Shape{1, 3, 4});
  CHECK(x.unsqueeze(-1).sizes() == Shape{3, 4, 1});
  CHECK(x.unsqueeze(2).squeeze().sizes() == Shape{3, 4});
  CHECK(x.permute({1, 0}).sizes() == Shape{4, 3});
  CHECK(ones({3, 1}).expand({2, 3, 4}).strides() == Shape{0, 1, 0});
  CHECK(x.flatten().sizes() == Shape{12});
  CHECK(ones({2, 3, 4, 5}).flatten(1, 2).sizes() == Shape{2, 12, 5});
  auto parts = x.unbind(1);
  REQUIRE(parts.size() == 4);
  CHECK(vals(parts[3]) == std::vector<double>{3, -1, 11});
  CHECK(x.chunk(2, 1).size() == 2);
}

TEST_CASE("seeds: view needs compatible strides, reshape copies when it must", "[tensor][views]") {
  Tensor x = arange(0.0, 6.0, 1.0, DType::F32).view({2, 3});
  Tensor t = x.t();  // non-contiguous
  CHECK_FALSE(t.is_contiguous());
  CHECK_THROWS_WITH(t.view({6}), Contains("view") && Contains("reshape"));
  Tensor r = t.reshape({6});
  CHECK(vals(r) == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(r.storage() != x.storage());  // a copy
  Tensor c = t.contiguous();
  CHECK(c.is_contiguous());
  CHECK(vals(c.view({6})) == std::vector<double>{0, 3, 1, 4, 2, 5});
  Tensor v = x.reshape({3, 2});  // contiguous: a view
  CHECK(v.storage() == x.storage());
  CHECK(x.view({-1}).sizes() == Shape{6});
  CHECK_THROWS_WITH(x.view({4, -1}), Contains("invalid for input of size 6"));
}

TEST_CASE("integer tensor indexing and index ops", "[tensor][index]") {
  Tensor x = arange(0.0, 6.0, 1.0, DType::F32).view({3, 2});
  Tensor idx = tensor({2, 0, 2}, DType::I64);
  CHECK(vals(x.index(idx)) == std::vector<double>{4, 5, 0, 1, 4, 5});
  CHECK(x.index(tensor({{0, 1}}, DType::I64)).sizes() == Shape{1, 2, 2});
  CHECK(vals(index_select(x, 1, tensor({1}, DType::I64))) == std::vector<double>{1, 3, 5});
  CHECK(vals(gather(x, 1, tensor({{1, 0}, {0, 0}, {1, 1}}, DType::I64))) == std::vector<double>{1, 0, 2, 2, 5, 5});
  Tensor z = zeros({2, 2});
  CHECK(vals(scatter_add(z, 0, tensor({{1, 0}, {1, 1}}, DType::I64), ones({2, 2}))) == std::vector<double>{0, 1, 2, 1});
  CHECK(vals(one_hot(tensor({2, 0}, DType::I64), 3)) == std::vector<double>{0, 0, 1, 1, 0, 0});
  CHECK_THROWS_WITH(index_select(x, 0, tensor({3}, DType::I64)), Contains("index 3 is out of bounds"));
  CHECK_THROWS_WITH(x.index(tensor({0.5})), Contains("integer"));
}

TEST_CASE("broadcasting", "[tensor][broadcast]") {
  Tensor a = ones({2, 1, 3}), b = arange(0.0, 4.0, 1.0, DType::F32).view({4, 1});
  Tensor c = a * b;
  CHECK(c.sizes() == Shape{2, 4, 3});
  CHECK(vals(c.select(0, 1).select(1, 0)) == std::vector<double>{0, 1, 2, 3});
  CHECK(broadcast_shapes({5, 1}, {1, 7}, "x") == Shape{5, 7});
}

TEST_CASE("sum over leading dims (bias gradients): each column in row order in double, f32 and bf16",
          "[tensor][reduce]") {
  // widths with and without a partial 4-column group, rows with and without a partial 4-row block
  Generator g(21);
  for (Shape s : {Shape{4, 8}, Shape{37, 70}, Shape{3, 5, 131}}) {
    for (DType t : {DType::F32, DType::BF16}) {
      INFO(str(s) << " " << dtype_name(t));
      Tensor x = randn(s, DType::F32, &g).to(t);
      const int64_t cols = s.back(), rows = x.numel() / cols;
      Shape lead;
      for (size_t d = 0; d + 1 < s.size(); ++d) lead.push_back(int64_t(d));
      std::vector<double> v = x.to(DType::F64).reshape({rows, cols}).tolist(),
                          got = sum(x, lead).to(DType::F64).tolist();
      for (int64_t c = 0; c < cols; ++c) {
        double ref = 0;  // what the kernel promises: row order, in double, rounded once to the output dtype
        for (int64_t r = 0; r < rows; ++r) ref += v[size_t(r * cols + c)];
        CHECK(got[size_t(c)] == tensor({ref}).to(t).to(DType::F64).item());
      }
    }
  }
}

TEST_CASE("misuse: mismatched shapes name the op and both shapes", "[tensor][errors]") {
  CHECK_THROWS_WITH(add(ones({2, 3}), ones({4})), Contains("add") && Contains("[2, 3]") && Contains("[4]"));
  CHECK_THROWS_WITH(mm(ones({2, 3}), ones({2, 3})), Contains("mm") && Contains("2x3 and 2x3"));
  CHECK_THROWS_WITH(matmul(ones({2, 3, 4}), ones({5, 6})), Contains("[2, 3, 4]"));
  CHECK_THROWS_WITH(cat({ones({2, 3}), ones({2, 4})}, 0), Contains("cat") && Contains("[2, 4]"));
  CHECK_THROWS_WITH(ones({2}).sum({3}), Contains("sum") && Contains("out of range"));
  CHECK_THROWS_WITH(ones({2, 2}).item(), Contains("item()"));
}

TEST_CASE("misuse: CUDA device without a GPU is one clear error", "[tensor][errors]") {
  if (cuda::device_count() > 0) {
    WARN("a CUDA device is present; the no-GPU error path is not exercised");
    return;
  }
  CHECK_THROWS_WITH(Device("cuda"), Contains("CUDA is not available"));
  CHECK_THROWS_WITH(Device("cuda:1"), Contains("CUDA is not available"));
  CHECK_THROWS_WITH(Device("tpu"), Contains("invalid device string 'tpu'"));
  CHECK(Device("cpu").is_cpu());
}

TEST_CASE("factories", "[tensor]") {
  CHECK(vals(arange(5)) == std::vector<double>{0, 1, 2, 3, 4});
  CHECK(arange(5).dtype() == DType::I64);
  CHECK(vals(linspace(0, 1, 5)) == std::vector<double>{0, 0.25, 0.5, 0.75, 1});
  CHECK(vals(full({2}, 7.0, DType::I32)) == std::vector<double>{7, 7});
  CHECK(zeros({0, 3}).numel() == 0);
  CHECK(tensor({{1, 2}, {3, 4}}).sizes() == Shape{2, 2});
  CHECK(scalar_tensor(3.0).dim() == 0);
  CHECK(ones({2}, TensorOptions().requires_grad()).requires_grad());
  CHECK_THROWS_WITH(ones({2}, DType::I64).requires_grad_(), Contains("floating point"));
}

TEST_CASE("RNG: seeded, reproducible, state save and restore", "[tensor][rng]") {
  Generator g(42);
  Tensor a = randn({1000}, {}, &g);
  GeneratorState s = g.get_state();
  Tensor b = rand({10}, {}, &g);
  g.set_state(s);
  Tensor c = rand({10}, {}, &g);
  CHECK(equal(b, c));
  Generator g2(42);
  CHECK(equal(a, randn({1000}, {}, &g2)));
  Generator g3(43);
  CHECK_FALSE(equal(a, randn({1000}, {}, &g3)));
  // moments of 100k draws
  Generator g4(7);
  Tensor n = randn({100000}, DType::F64, &g4);
  CHECK(std::abs(n.mean().item()) < 0.02);
  CHECK(std::abs(tr::std(n).item() - 1.0) < 0.02);
  Tensor u = rand({100000}, DType::F64, &g4);
  CHECK(u.min().item() >= 0.0);
  CHECK(u.max().item() < 1.0);
  CHECK(std::abs(u.mean().item() - 0.5) < 0.01);
  // the global generator
  manual_seed(5);
  Tensor d1 = rand({4});
  manual_seed(5);
  CHECK(equal(d1, rand({4})));
  Tensor p = randperm(10, &g);
  std::vector<double> sorted = vals(p);
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == vals(arange(10)));
  Tensor ri = randint(3, 6, {1000}, DType::I64, &g);
  CHECK(ri.min().item() == 3);
  CHECK(ri.max().item() == 5);
}

TEST_CASE("dropout: train scales kept values by 1/(1-p), eval is identity", "[tensor][rng]") {
  Generator g(1);
  Tensor x = ones({100000});
  Tensor y = dropout(x, 0.3, true, &g);
  double kept = mean(cast(y > 0.0, DType::F32)).item();
  CHECK(std::abs(kept - 0.7) < 0.01);
  CHECK(amax(y).item() == Approx(1.0 / 0.7));
  CHECK(equal(dropout(x, 0.3, false, &g), x));
  // the seeds' example: [1, 2, 3, 4, 5] with p = 0.3 keeps values x / 0.7
  Tensor s = dropout(tensor({1, 2, 3, 4, 5}), 0.3, true, &g);
  for (int i = 0; i < 5; ++i) {
    double v = s.tolist()[i];
    CHECK((v == 0.0 || v == Approx((i + 1) / 0.7)));
  }
  CHECK_THROWS_WITH(dropout_mask(x, 1.5), Contains("probability"));
}

TEST_CASE("init: kaiming and xavier bounds follow torch's fan computation", "[tensor][init]") {
  Tensor w = empty({64, 32, 3, 3});
  auto [fi, fo] = init::calculate_fan_in_and_fan_out(w);
  CHECK(fi == 288);
  CHECK(fo == 576);
  Generator g(0);
  init::kaiming_uniform_(w, std::sqrt(5.0), &g);  // nn.Conv2d's default: bound = 1/sqrt(fan_in)
  double bound = 1.0 / std::sqrt(288.0);
  CHECK(w.max().item() <= bound);
  CHECK(w.min().item() >= -bound);
  CHECK(w.max().item() > 0.95 * bound);
  Tensor x = empty({200, 300});
  init::xavier_normal_(x, 1.0, &g);
  CHECK(tr::std(x).item() == Approx(std::sqrt(2.0 / 500.0)).epsilon(0.03));
  init::kaiming_normal_(x, 0.0, &g, "fan_in", "relu");
  CHECK(tr::std(x).item() == Approx(std::sqrt(2.0 / 300.0)).epsilon(0.03));
  CHECK(init::calculate_gain("tanh") == Approx(5.0 / 3.0));
  CHECK_THROWS_WITH(init::calculate_gain("swish"), Contains("known:"));
  Tensor b = empty({3});
  CHECK_THROWS_WITH(init::xavier_uniform_(b), Contains("fewer than 2 dimensions"));
}

TEST_CASE("memory statistics track current and peak bytes", "[tensor][allocator]") {
  MemoryStats s0 = memory_stats(kCPU);
  reset_peak_memory_stats(kCPU);
  {
    Tensor big = empty({1 << 20});  // 4 MiB
    MemoryStats s1 = memory_stats(kCPU);
    CHECK(s1.allocated - s0.allocated >= (4 << 20));
    CHECK(s1.peak_allocated >= s1.allocated);
  }
  MemoryStats s2 = memory_stats(kCPU);
  CHECK(s2.allocated == s0.allocated);
  CHECK(s2.peak_allocated >= s0.allocated + (4 << 20));
  reset_max_memory_allocated(kCPU);
  CHECK(max_memory_allocated(kCPU) == memory_allocated(kCPU));
}

}  // namespace test_tensor
