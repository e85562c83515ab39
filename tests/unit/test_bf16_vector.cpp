// softmax rows with masked lanes (softmax.cpp exp8_nonpositive); the 8-lane bf16 paths of the CPU pointwise kernels
// (vec_math.h: load_bf16x8, round_bf16x8, map_bf16x8): f32 <-> bf16 casts bit for bit equal to the scalar conversions
// of core/half.h on ties, NaNs, infinities, subnormals and overflow; bf16 gelu, exp and gelu_backward equal to the f32
// kernels on the widened values rounded once (what the scalar loop computes in float); lengths with a tail; strided
// inputs keep the scalar loop.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include "core/half.h"
#include "ops/factories.h"
#include "ops/ops.h"

namespace test_bf16_vector {

using namespace tr;

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// f32 values that exercise the rounding: random normals at several scales, exact ties below and
// above even, NaNs (quiet, signalling, negative), infinities, zeros, subnormals, the largest floats
std::vector<float> tricky_floats(int64_t n_random) {
  std::vector<float> v;
  Tensor r = randn({n_random});
  for (double x : r.tolist()) v.push_back(float(x) * (v.size() % 3 == 0 ? 1e-3f : v.size() % 3 == 1 ? 1.0f : 3e4f));
  for (uint32_t hi : {0x3f80u, 0x3f81u, 0xbf80u, 0xbf81u, 0x7f7fu})
    for (uint32_t lo : {0x7fffu, 0x8000u, 0x8001u, 0x0000u, 0xffffu}) v.push_back(float_of(hi << 16 | lo));
  for (uint32_t u : {0x7fc00000u, 0x7f800001u, 0xffc00001u, 0x7fbfffffu, 0x7f800000u, 0xff800000u, 0x00000000u,
                     0x80000000u, 0x00000001u, 0x807fffffu, 0x00400000u, 0x7f7fffffu, 0xff7fffffu})
    v.push_back(float_of(u));
  return v;
}

std::vector<uint16_t> bf16_bits(const Tensor& t) {
  REQUIRE(t.dtype() == DType::BF16);
  Tensor c = t.contiguous();
  const uint16_t* p = static_cast<const uint16_t*>(c.raw_data());
  return std::vector<uint16_t>(p, p + c.numel());
}

Tensor f32_tensor(const std::vector<float>& v) {
  Tensor t = empty({int64_t(v.size())}, DType::F32);
  std::memcpy(t.raw_data(), v.data(), v.size() * 4);
  return t;
}

}  // namespace

TEST_CASE("bf16 casts: 8 lanes equal the scalar conversion bit for bit", "[bf16][pointwise]") {
  for (int64_t n : {0, 5, 8, 1003}) {
    std::vector<float> v = tricky_floats(n);
    Tensor x = f32_tensor(v);
    std::vector<uint16_t> got = bf16_bits(cast(x, DType::BF16));
    REQUIRE(got.size() == v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      INFO("f32 bits " << std::hex << bits_of(v[i]));
      CHECK(got[i] == float_to_bf16_bits(v[i]));
    }
    // widening is exact
    Tensor back = cast(cast(x, DType::BF16), DType::F32);
    const float* pb = back.data_ptr<float>();
    for (size_t i = 0; i < v.size(); ++i) CHECK(bits_of(pb[i]) == uint32_t(got[i]) << 16);
  }
  // a transposed (strided) f32 input takes the scalar loop: the same bits
  Tensor m = randn({37, 11}) * 7.0;
  std::vector<uint16_t> strided = bf16_bits(cast(m.t(), DType::BF16)),
                        flat = bf16_bits(cast(m.t().contiguous(), DType::BF16));
  CHECK(strided == flat);
  // views with dense rows (a narrowed last dim, 2-D and 3-D) convert row by row: the same bits
  for (Tensor v :
       {Tensor(randn({37, 20}) * 5.0).narrow(1, 3, 11), Tensor(randn({4, 5, 12})).narrow(2, 2, 7).narrow(0, 1, 2)}) {
    INFO("view of " << v.numel() << " elements, " << v.dim() << "-D");
    CHECK(bf16_bits(cast(v, DType::BF16)) == bf16_bits(cast(v.contiguous(), DType::BF16)));
    Tensor back = cast(Tensor(cast(v, DType::BF16)).contiguous(), DType::F32);
    CHECK(equal(cast(cast(v, DType::BF16), DType::F32), back));
  }
  Tensor b16 = cast(randn({9, 30}), DType::BF16).narrow(1, 5, 19);  // bf16 -> f32 from a narrowed view
  CHECK(equal(cast(b16, DType::F32), cast(b16.contiguous(), DType::F32)));
}

TEST_CASE("bf16 gelu, exp, gelu_backward: the f32 lanes on widened values, rounded once", "[bf16][pointwise]") {
  for (int64_t n : {3, 8, 1001}) {
    Tensor x = cast(randn({n}) * 3.0, DType::BF16), g = cast(randn({n}), DType::BF16);
    Tensor x32 = cast(x, DType::F32), g32 = cast(g, DType::F32);
    for (const char* form : {"none", "tanh"}) {
      INFO(form << ", n " << n);
      CHECK(bf16_bits(gelu(x, form)) == bf16_bits(cast(gelu(x32, form), DType::BF16)));
      CHECK(bf16_bits(gelu_backward(g, x, form)) == bf16_bits(cast(gelu_backward(g32, x32, form), DType::BF16)));
    }
    CHECK(bf16_bits(exp(x)) == bf16_bits(cast(exp(x32), DType::BF16)));
    // and within one bf16 step of the formula in double, or the f32 cancellation of 1 + erf(x / sqrt 2)
    // for x << 0 (|error| ~ 1e-7 |x|)
    std::vector<double> y = cast(gelu(x), DType::F32).tolist(), xs = x32.tolist();
    for (size_t i = 0; i < xs.size(); ++i) {
      const double ref = 0.5 * xs[i] * (1.0 + std::erf(xs[i] / std::sqrt(2.0)));
      CHECK(std::abs(y[i] - ref) <= std::abs(ref) * (1.0 / 128) + 1e-6);
    }
  }
  // non-contiguous bf16 keeps the scalar loop, which computes the same function up to libm's erf:
  // one bf16 step at most
  Tensor m = cast(randn({16, 9}), DType::BF16);
  std::vector<double> a = cast(gelu(m.t()), DType::F32).tolist(),
                      b = cast(gelu(m.t().contiguous()), DType::F32).tolist();
  for (size_t i = 0; i < a.size(); ++i) CHECK(std::abs(a[i] - b[i]) <= std::abs(b[i]) * (1.0 / 128) + 1e-30);
}

TEST_CASE("softmax rows with a causal mask's -inf and exponents in the denormal range", "[softmax][pointwise]") {
  // rows of 21 (two 8-lane blocks and a tail): -inf lanes give 0 in the vector, lanes whose
  // exponent is in [-104, -87) take scalar expf (denormal results), the rest libmvec
  const int64_t n = 21;
  std::vector<double> v;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = 0; k < n; ++k)
      v.push_back(k > r ? -INFINITY : k % 5 == 0 ? -95.5 : k % 7 == 0 ? -88.25 : k % 3 == 0 ? -110.0 : 0.1 * double(k));
  Tensor x = from_vector(v, {n, n}, DType::F32);
  std::vector<double> y = softmax(x, -1).tolist(), ly = log_softmax(x, -1).tolist();
  for (int64_t r = 0; r < n; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t k = 0; k <= r; ++k) m = std::max(m, double(float(v[size_t(r * n + k)])));
    for (int64_t k = 0; k <= r; ++k) s += std::exp(double(float(v[size_t(r * n + k)])) - m);
    for (int64_t k = 0; k < n; ++k) {
      const double xv = double(float(v[size_t(r * n + k)]));
      const double want = k > r ? 0.0 : std::exp(xv - m) / s;
      INFO("row " << r << " col " << k << " x " << xv);
      CHECK(y[size_t(r * n + k)] == Approx(want).epsilon(1e-5).margin(1e-44));
      if (k > r)
        CHECK(std::isinf(ly[size_t(r * n + k)]));
      else
        CHECK(ly[size_t(r * n + k)] == Approx(xv - m - std::log(s)).epsilon(1e-5));
    }
  }
}

}  // namespace test_bf16_vector
