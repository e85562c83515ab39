// The vdpbf16ps GEMM (mm/bmm on bf16 operands) equals f32 sgemm on the same bf16 values, rounded
// once to bf16, for odd and tile-straddling shapes and transposed operands. Skips where the CPU
// has no AVX512_BF16.
#include <catch2/catch.hpp>
#include "core/grad_mode.h"
#include "ops/cpu/cpu_isa.h"
#include "ops/cpu/gemm_bf16.h"
#include "ops/cpu/onednn_matmul.h"
#include "ops/ops.h"

namespace test_gemm_bf16 {

using namespace tr;

TEST_CASE("bf16 GEMM (vdpbf16ps) equals f32 sgemm on the bf16 values", "[ops][bf16]") {
  if (!cpu::use_avx512_bf16()) {
    WARN("skipped: this CPU has no AVX512_BF16 (bf16 matmuls use the f32 path, tested elsewhere)");
    return;
  }
  NoGradGuard ng;
  struct Case {
    int64_t M, K, N;
    bool ta, tb;
  };
  for (Case c : {Case{1, 1, 1, false, false}, Case{8, 2, 32, false, false}, Case{9, 3, 33, false, false},
                 Case{17, 129, 70, true, false}, Case{64, 128, 96, false, true}, Case{5, 300, 7, true, true},
                 Case{128, 512, 384, false, false}}) {
    INFO("M " << c.M << " K " << c.K << " N " << c.N << " ta " << c.ta << " tb " << c.tb);
    Tensor a = (c.ta ? randn({c.K, c.M}).t() : randn({c.M, c.K})).to(DType::BF16);
    Tensor b = (c.tb ? randn({c.N, c.K}).t() : randn({c.K, c.N})).to(DType::BF16);
    Tensor ref = mm(a.to(DType::F32), b.to(DType::F32));  // sgemm on the same values
    Tensor y = mm(a, b);
    REQUIRE(y.dtype() == DType::BF16);
    REQUIRE(y.sizes() == Shape{c.M, c.N});
    // only the summation order differs: within one bf16 rounding of the f32 result
    std::vector<double> got = y.to(DType::F64).tolist(), want = ref.to(DType::F64).tolist();
    double scale = 0;
    for (double w : want) scale = std::max(scale, std::abs(w));
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
      bad += !(std::abs(got[i] - want[i]) <= std::abs(want[i]) * (1.0 / 128) + scale * 1e-5);
    CHECK(bad == 0);
    // f32 output
    Tensor y32 = empty({c.M, c.N}, DType::F32);
    cpu::gemm_bf16(a, b, y32);
    CHECK(allclose(y32, ref, 1e-5, 1e-4 * scale));
  }
  // bmm goes through the same kernel
  Tensor x = randn({3, 20, 40}).to(DType::BF16), w = randn({3, 40, 50}).to(DType::BF16);
  CHECK(allclose(bmm(x, w).to(DType::F32), bmm(x.to(DType::F32), w.to(DType::F32)), 1.0 / 64, 1e-2));
}

TEST_CASE("oneDNN's matmul primitive equals f32 sgemm on the same values", "[ops][bf16]") {
  NoGradGuard ng;
  struct Case {
    int64_t M, K, N;
    bool ta, tb;
  };
  for (DType in : {DType::F32, DType::BF16}) {
    if (in == DType::BF16 && !cpu::use_avx512_bf16()) {
      WARN("bf16 skipped: oneDNN has no native bf16 kernels on this CPU");
      continue;
    }
    for (Case c : {Case{1, 1, 1, false, false}, Case{9, 3, 33, false, false}, Case{17, 129, 70, true, false},
                   Case{64, 128, 96, false, true}, Case{5, 300, 7, true, true}}) {
      INFO(dtype_name(in) << " M " << c.M << " K " << c.K << " N " << c.N << " ta " << c.ta << " tb " << c.tb);
      Tensor a = (c.ta ? randn({c.K, c.M}).t() : randn({c.M, c.K})).to(in);
      Tensor b = (c.tb ? randn({c.N, c.K}).t() : randn({c.K, c.N})).to(in);
      Tensor ref = mm(a.to(DType::F32), b.to(DType::F32));
      for (DType out : {in, DType::F32}) {
        Tensor y = empty({c.M, c.N}, out);
        REQUIRE(cpu::onednn_matmul(in, out, c.M, c.N, c.K, a.raw_data(), a.stride(0), a.stride(1), b.raw_data(),
                                   b.stride(0), b.stride(1), y.raw_data()));
        const double tol = out == DType::BF16 ? 1.0 / 64 : 1e-4;
        CHECK(allclose(y.to(DType::F32), ref, tol, tol * double(c.K)));
      }
    }
  }
}

}  // namespace test_gemm_bf16
