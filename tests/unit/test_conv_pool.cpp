// conv2d, max_pool2d, avg_pool2d: shapes, hand-checked values, the fast CPU kernels against the
// naive loops on awkward shapes, every option, error messages, and gradcheck cases of all six ops.
#include <catch2/catch.hpp>
#include "ops/cpu/onednn.h"
#include "ops/cpu/onednn_conv.h"
#include <omp.h>
#include <cmath>
#include "op_cases.h"
#include "ops/ops.h"
#include "ops/registry.h"

// The reference loops of lib/ops/cpu/conv.cpp (outputs pre-allocated with the op's shape).
namespace tr::cpu {
void conv2d_forward_naive(const Tensor& x, const Tensor& w, const Tensor& y, const Attrs& a);
void conv2d_backward_input_naive(const Tensor& gy, const Tensor& w, const Tensor& gx, const Attrs& a);
void conv2d_backward_weight_naive(const Tensor& gy, const Tensor& x, const Tensor& gw, const Attrs& a);
}  // namespace tr::cpu

namespace test_conv_pool {

using namespace tr;
using namespace tr::test;

namespace {

struct ConvCfg {
  Shape x, w;
  Pair stride, padding, dilation;
  int64_t groups;
};

Attrs conv_attrs(const ConvCfg& c) {
  return {{"stride", c.stride}, {"padding", c.padding}, {"dilation", c.dilation}, {"groups", c.groups}};
}
Tensor randn_t(const Shape& s, DType t, uint64_t seed) {
  Generator g(seed);
  return randn(s, TensorOptions(DType::F64), &g).to(t);
}
Tensor t4(std::vector<double> v, Shape s, DType t = DType::F32) { return from_vector(v, s, TensorOptions(t)); }
Tensor arange4(Shape s, DType t = DType::F32) { return arange(0.0, double(numel_of(s)), 1.0, t).reshape(s); }

// Distinct values 0.1 apart in random order: no ties, so max pooling is differentiable.
Tensor distinct64(const Shape& s, uint64_t seed) {
  Generator g(seed);
  Tensor t = (randperm(numel_of(s), &g).to(DType::F64) * 0.1).reshape(s);
  return t.detach().requires_grad_(true);
}

// Forward, input gradient and weight gradient of conv2d (autograd) against the naive loops.
void check_against_naive(const ConvCfg& c, DType t, double tol, uint64_t seed) {
  INFO("x " << str(c.x) << " w " << str(c.w) << " stride " << str(c.stride) << " padding " << str(c.padding)
            << " dilation " << str(c.dilation) << " groups " << c.groups << " dtype " << dtype_name(t));
  Tensor x = randn_t(c.x, t, seed).requires_grad_(true);
  Tensor w = randn_t(c.w, t, seed + 1).requires_grad_(true);
  Tensor y = conv2d(x, w, Tensor(), c.stride, c.padding, c.dilation, c.groups);
  Tensor gy = randn_t(y.sizes(), t, seed + 2);
  y.backward(gy);
  Attrs a = conv_attrs(c);
  Tensor y_ref = empty(y.sizes(), t), gx_ref = empty(c.x, t), gw_ref = empty(c.w, t);
  cpu::conv2d_forward_naive(x.detach(), w.detach(), y_ref, a);
  cpu::conv2d_backward_input_naive(gy, w.detach(), gx_ref, a);
  cpu::conv2d_backward_weight_naive(gy, x.detach(), gw_ref, a);
  CHECK(allclose(y, y_ref, tol, tol));
  CHECK(allclose(x.grad(), gx_ref, tol, tol));
  CHECK(allclose(w.grad(), gw_ref, tol, tol));
}

const std::vector<ConvCfg>& awkward_configs() {
  static const std::vector<ConvCfg> cfgs = {
      {{2, 3, 7, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},   // same padding
      {{3, 6, 9, 7}, {4, 3, 3, 2}, {2, 1}, {1, 2}, {2, 1}, 2},   // everything uneven, groups
      {{1, 4, 6, 11}, {8, 1, 2, 3}, {3, 2}, {0, 1}, {1, 3}, 4},  // depthwise-like, N = 1
      {{2, 4, 5, 5}, {6, 4, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},   // 1x1: direct path
      {{2, 4, 5, 6}, {6, 2, 1, 1}, {2, 2}, {1, 0}, {1, 1}, 2},   // 1x1 with stride and padding
      {{5, 2, 4, 4}, {3, 2, 4, 4}, {1, 1}, {0, 0}, {1, 1}, 1},   // kernel = input: 1x1 output
      {{2, 1, 3, 3}, {2, 1, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 1},   // padding > kernel / 2
      {{9, 3, 8, 8}, {5, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1},   // N > threads: batch split
      {{2, 6, 10, 3}, {6, 1, 5, 1}, {1, 1}, {2, 0}, {1, 1}, 6},  // fully depthwise, tall kernel
      {{3, 2, 7, 7}, {2, 2, 3, 3}, {3, 3}, {0, 0}, {1, 1}, 1},   // stride leaves rows uncovered
      {{13, 3, 7, 7}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},  // small maps: 10 samples a gemm, then 3
  };
  return cfgs;
}

Tensor conv_pool_ref(const Tensor& x, int64_t k) {
  // avg_pool2d(x, k, stride k) as a depthwise conv with weights 1 / k^2
  int64_t C = x.size(1);
  return conv2d(x, full({C, 1, k, k}, 1.0 / double(k * k), x.dtype()), Tensor(), {k, k}, {0, 0}, {1, 1}, C);
}

}  // namespace

// ---------------------------------------------------------------- conv2d

TEST_CASE("conv2d: output shapes", "[conv]") {
  Tensor x = zeros({2, 3, 32, 30});
  CHECK(conv2d(x, zeros({8, 3, 5, 5}), Tensor(), {2, 2}, {2, 2}).sizes() == Shape{2, 8, 16, 15});
  CHECK(conv2d(x, zeros({8, 3, 3, 3})).sizes() == Shape{2, 8, 30, 28});
  CHECK(conv2d(x, zeros({8, 3, 3, 3}), Tensor(), {1, 1}, {1, 1}).sizes() == Shape{2, 8, 32, 30});
  CHECK(conv2d(x, zeros({8, 3, 3, 3}), Tensor(), {1, 1}, {0, 0}, {2, 3}).sizes() == Shape{2, 8, 28, 24});
  CHECK(conv2d(x, zeros({6, 1, 3, 3}), Tensor(), {3, 1}, {0, 0}, {1, 1}, 3).sizes() == Shape{2, 6, 10, 28});
  CHECK(conv2d(x, zeros({8, 3, 3, 3}), Tensor(), {2}, {1}).sizes() == Shape{2, 8, 16, 15});  // one value: both dims
  CHECK(conv2d(zeros({0, 3, 5, 5}), zeros({4, 3, 3, 3})).sizes() == Shape{0, 4, 3, 3});
}

TEST_CASE("conv2d: hand-checked values", "[conv]") {
  Tensor x = arange4({1, 1, 4, 4});  // 0..15
  Tensor w = ones({1, 1, 2, 2});
  // 2x2 window sums
  CHECK(equal(conv2d(x, w), t4({10, 14, 18, 26, 30, 34, 42, 46, 50}, {1, 1, 3, 3})));
  CHECK(equal(conv2d(x, w, Tensor(), {2, 2}), t4({10, 18, 42, 50}, {1, 1, 2, 2})));
  // dilation 2 reads (0,0), (0,2), (2,0), (2,2) of each window
  CHECK(equal(conv2d(x, w, Tensor(), {1, 1}, {0, 0}, {2, 2}), t4({20, 24, 36, 40}, {1, 1, 2, 2})));
  // zero padding: a 3x3 box over [[1, 2], [3, 4]] padded by 1 sees the whole input at every position
  Tensor x2 = t4({1, 2, 3, 4}, {1, 1, 2, 2});
  CHECK(equal(conv2d(x2, ones({1, 1, 3, 3}), Tensor(), {1, 1}, {1, 1}), full({1, 1, 2, 2}, 10.0)));
  // padding on one side only: width 1 -> row sums with the neighbour columns zero
  CHECK(equal(conv2d(x2, ones({1, 1, 1, 3}), Tensor(), {1, 1}, {0, 1}), t4({3, 3, 7, 7}, {1, 1, 2, 2})));
  // the kernel is not flipped (cross-correlation, as torch)
  CHECK(equal(conv2d(t4({1, 2, 3}, {1, 1, 1, 3}), t4({1, 0, 0}, {1, 1, 1, 3})), t4({1}, {1, 1, 1, 1})));
  // groups: channel c only meets weight c
  Tensor xg = t4({1, 2}, {1, 2, 1, 1});
  CHECK(equal(conv2d(xg, t4({3, 5}, {2, 1, 1, 1}), Tensor(), {1, 1}, {0, 0}, {1, 1}, 2), t4({3, 10}, {1, 2, 1, 1})));
  // groups=1 sums over channels: [3*1 + 5*2]
  CHECK(equal(conv2d(xg, t4({3, 5}, {1, 2, 1, 1})), t4({13}, {1, 1, 1, 1})));
  // bias added per output channel
  CHECK(equal(conv2d(xg, t4({3, 5}, {2, 1, 1, 1}), t4({0.5, -1}, {2}), {1, 1}, {0, 0}, {1, 1}, 2),
              t4({3.5, 9}, {1, 2, 1, 1})));
}

TEST_CASE("conv2d: hand-checked gradients", "[conv]") {
  // y = sum of 2x2 windows of a 3x3 input: dx counts the windows covering each element
  Tensor x = arange4({1, 1, 3, 3}).requires_grad_(true);
  Tensor w = ones({1, 1, 2, 2}).requires_grad_(true);
  conv2d(x, w).sum().backward();
  CHECK(equal(x.grad(), t4({1, 2, 1, 2, 4, 2, 1, 2, 1}, {1, 1, 3, 3})));
  // dw[i, j] = sum of the inputs tap (i, j) reads: 0+1+3+4, 1+2+4+5, 3+4+6+7, 4+5+7+8
  CHECK(equal(w.grad(), t4({8, 12, 20, 24}, {1, 1, 2, 2})));
}

TEST_CASE("conv2d: fast kernels match the naive loops on awkward shapes", "[conv]") {
  uint64_t seed = 100;
  for (auto& c : awkward_configs()) {
    check_against_naive(c, DType::F64, 1e-10, seed);
    check_against_naive(c, DType::F32, 1e-4, seed);
    seed += 10;
  }
}

TEST_CASE("conv2d: non-contiguous inputs", "[conv]") {
  Tensor xt = randn_t({2, 6, 7, 3}, DType::F64, 1).permute({0, 3, 1, 2});  // [2, 3, 6, 7], strided
  Tensor wt = randn_t({3, 3, 4, 2}, DType::F64, 2).transpose(0, 1);        // [3, 3, 4, 2]
  REQUIRE_FALSE(xt.is_contiguous());
  Attrs a{{"stride", Pair{1, 2}}, {"padding", Pair{1, 1}}, {"dilation", Pair{1, 1}}, {"groups", int64_t(1)}};
  Tensor y = conv2d(xt, wt, Tensor(), {1, 2}, {1, 1});
  Tensor ref = empty(y.sizes(), DType::F64);
  cpu::conv2d_forward_naive(xt.contiguous(), wt.contiguous(), ref, a);
  CHECK(allclose(y, ref, 1e-12, 1e-12));
  CHECK(allclose(y, conv2d(xt.contiguous(), wt.contiguous(), Tensor(), {1, 2}, {1, 1}), 0, 0));
}

TEST_CASE("conv2d: bias", "[conv]") {
  Tensor x = randn_t({2, 4, 5, 5}, DType::F64, 3);
  Tensor w = randn_t({6, 2, 3, 3}, DType::F64, 4);
  Tensor b = randn_t({6}, DType::F64, 5);
  Tensor y = conv2d(x, w, b, {2, 1}, {1, 1}, {1, 1}, 2);
  Tensor y0 = conv2d(x, w, Tensor(), {2, 1}, {1, 1}, {1, 1}, 2);
  CHECK(allclose(y, y0 + b.reshape({1, 6, 1, 1}), 1e-12, 1e-12));
  // db = sum of dy over batch and positions
  Tensor bb = b.clone().requires_grad_(true);
  conv2d(x, w, bb, {2, 1}, {1, 1}, {1, 1}, 2).sum().backward();
  CHECK(allclose(bb.grad(), full({6}, double(2 * y.size(2) * y.size(3)), DType::F64), 1e-12, 1e-12));
}

TEST_CASE("conv2d: the bias added inside the kernel equals adding it after, at several pool sizes", "[conv]") {
  const int saved = omp_get_max_threads();
  uint64_t seed = 400;
  for (int nt : {1, 2, 3}) {
    omp_set_num_threads(nt);
    for (auto& c : awkward_configs()) {
      INFO("threads " << nt << " x " << str(c.x) << " w " << str(c.w));
      Tensor x = randn_t(c.x, DType::F64, seed), w = randn_t(c.w, DType::F64, seed + 1);
      Tensor b = randn_t({c.w[0]}, DType::F64, seed + 2);
      Tensor y = conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
      Tensor y0 = conv2d(x, w, Tensor(), c.stride, c.padding, c.dilation, c.groups);
      CHECK(allclose(y, y0 + b.reshape({1, c.w[0], 1, 1}), 1e-12, 1e-12));
      seed += 3;
    }
  }
  omp_set_num_threads(saved);
  // no input channels: the output is the bias
  Tensor e = conv2d(zeros({2, 0, 3, 3}), zeros({4, 0, 1, 1}), tensor({1.0, 2.0, 3.0, 4.0}));
  CHECK(equal(e, tensor({1.0, 2.0, 3.0, 4.0}).reshape({1, 4, 1, 1}).expand({2, 4, 3, 3})));
}

TEST_CASE("conv2d: threaded paths (batch split, row and channel blocks) match the naive loops", "[conv]") {
  // The kernels cut work by batch when it fills the pool, else into blocks of output rows
  // (forward) or input channels (backward); exercise each split at several pool sizes.
  const int saved = omp_get_max_threads();
  const std::vector<ConvCfg> cfgs = {
      {{1, 8, 20, 20}, {16, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},    // one sample: blocks
      {{1, 8, 21, 19}, {16, 4, 3, 2}, {2, 1}, {1, 0}, {1, 2}, 2},    // blocks within groups
      {{1, 12, 20, 20}, {16, 12, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},  // blocks, direct 1x1
      {{7, 8, 20, 20}, {16, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},    // batch split, weight partials
      {{6, 6, 18, 18}, {12, 2, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 3},    // batch split with groups
  };
  for (int nt : {1, 2, 3, 4}) {
    omp_set_num_threads(nt);
    INFO("threads " << nt);
    uint64_t seed = 300;
    for (auto& c : cfgs) check_against_naive(c, DType::F32, 1e-4, seed += 10);
  }
  omp_set_num_threads(saved);
}

TEST_CASE("conv2d: the oneDNN path matches the naive loops and is deterministic", "[conv]") {
  // 16 or more input channels (its forward's threshold): 3x3 same, stride 2 with a 1x1 projection,
  // dilation, a partly covered input (right padding below zero), uneven sizes; 1 and 2 threads
  INFO(cpu::onednn_conv_enabled());
  const std::vector<ConvCfg> cfgs = {
      {{2, 16, 14, 14}, {32, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
      {{3, 32, 14, 13}, {64, 32, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1},
      {{2, 32, 15, 15}, {16, 32, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1},
      {{1, 16, 11, 9}, {16, 16, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 1},
      {{2, 17, 10, 10}, {24, 17, 5, 3}, {3, 2}, {0, 1}, {1, 1}, 1},
  };
  const int saved = omp_get_max_threads();
  for (int nt : {1, 2}) {
    omp_set_num_threads(nt);
    uint64_t seed = 500;
    for (auto& c : cfgs) check_against_naive(c, DType::F32, 1e-4, seed += 10);
  }
  omp_set_num_threads(saved);
  // with a bias, and the same bits on every call
  Generator g(12);
  Tensor x = randn({4, 32, 12, 12}, DType::F32, &g), w = randn({48, 32, 3, 3}, DType::F32, &g),
         b = randn({48}, DType::F32, &g), gy = randn({4, 48, 12, 12}, DType::F32, &g);
  Tensor y = conv2d(x, w, b, {1, 1}, {1, 1});
  CHECK(allclose(y, conv2d(x, w, Tensor(), {1, 1}, {1, 1}) + b.reshape({1, 48, 1, 1}), 1e-5, 1e-5));
  Attrs a{{"stride", Pair{1, 1}}, {"padding", Pair{1, 1}}, {"dilation", Pair{1, 1}}, {"groups", int64_t(1)}};
  Attrs aw = a, ai = a;
  aw.set("weight_size", Shape{48, 32, 3, 3});
  ai.set("input_size", Shape{4, 32, 12, 12});
  Tensor gw = dispatch1("conv2d_backward_weight", {gy, x}, aw), gx = dispatch1("conv2d_backward_input", {gy, w}, ai);
  // the bias gradient from the weight gradient's pass (torch's oneDNN diff_bias), on both paths
  Attrs awb = aw;
  awb.set("bias", int64_t(1));
  const std::vector<Tensor> gwb = dispatch("conv2d_backward_weight", {gy, x}, awb);
  REQUIRE(gwb.size() == 2);
  CHECK(gwb[1].sizes() == Shape{48});
  CHECK(allclose(gwb[0], gw, 1e-5, 1e-4));
  CHECK(allclose(gwb[1], sum(gy, {0, 2, 3}), 1e-5, 1e-4));
  for (int i = 0; i < 3; ++i) {
    CHECK(equal(y, conv2d(x, w, b, {1, 1}, {1, 1})));
    CHECK(equal(gw, dispatch1("conv2d_backward_weight", {gy, x}, aw)));
    CHECK(equal(gx, dispatch1("conv2d_backward_input", {gy, w}, ai)));
    const std::vector<Tensor> again = dispatch("conv2d_backward_weight", {gy, x}, awb);
    CHECK((equal(again[0], gwb[0]) && equal(again[1], gwb[1])));
  }
}

TEST_CASE("conv2d: bf16 on oneDNN's native kernels equals f32 on the same values, rounded once", "[conv][bf16]") {
  if (!cpu::onednn_conv_enabled() || !cpu::onednn_bf16_preferred()) {
    WARN("skipped: oneDNN's bf16 kernels are not this CPU's bf16 path (bf16 convolutions compute in f32 copies)");
    return;
  }
  Generator g(13);
  for (ConvCfg c : {ConvCfg{{4, 32, 12, 12}, {48, 32, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
                    ConvCfg{{2, 16, 9, 9}, {32, 16, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1}}) {
    INFO("x " << str(c.x) << " w " << str(c.w));
    Tensor x = randn(c.x, DType::F32, &g).to(DType::BF16), w = randn(c.w, DType::F32, &g).to(DType::BF16),
           b = randn({c.w[0]}, DType::F32, &g).to(DType::BF16);
    Tensor y = conv2d(x, w, b, c.stride, c.padding);
    Tensor ref = conv2d(x.to(DType::F32), w.to(DType::F32), b.to(DType::F32), c.stride, c.padding);
    REQUIRE(y.dtype() == DType::BF16);
    CHECK(allclose(y.to(DType::F32), ref, 1.0 / 64, 1e-2));
    Attrs a = conv_attrs(c);
    Attrs ai = a, aw = a;
    ai.set("input_size", c.x);
    aw.set("weight_size", c.w);
    Tensor gy = randn(y.sizes(), DType::F32, &g).to(DType::BF16);
    Tensor gx = dispatch1("conv2d_backward_input", {gy, w}, ai), gw = dispatch1("conv2d_backward_weight", {gy, x}, aw);
    Tensor gx32 = dispatch1("conv2d_backward_input", {gy.to(DType::F32), w.to(DType::F32)}, ai),
           gw32 = dispatch1("conv2d_backward_weight", {gy.to(DType::F32), x.to(DType::F32)}, aw);
    CHECK(gx.dtype() == DType::BF16);
    CHECK(allclose(gx.to(DType::F32), gx32, 1.0 / 64, 2e-2));
    CHECK(allclose(gw.to(DType::F32), gw32, 1.0 / 64, 5e-2));
  }
}

TEST_CASE("conv2d: weight gradient is deterministic", "[conv]") {
  for (Shape xs : {Shape{16, 8, 12, 12}, Shape{1, 8, 12, 12}}) {
    ConvCfg c{xs, {12, 4, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2};
    Tensor x = randn_t(c.x, DType::F32, 8);
    Tensor gy = randn_t({xs[0], 12, 12, 12}, DType::F32, 10);
    Attrs a = conv_attrs(c);
    a.set("weight_size", c.w);
    Tensor gw1 = dispatch1("conv2d_backward_weight", {gy, x}, a);
    for (int i = 0; i < 3; ++i) CHECK(equal(gw1, dispatch1("conv2d_backward_weight", {gy, x}, a)));
  }
}

TEST_CASE("conv2d: f16 and bf16 compute through f32", "[conv]") {
  ConvCfg c{{2, 4, 6, 6}, {4, 2, 3, 3}, {1, 2}, {1, 1}, {1, 1}, 2};
  for (DType t : {DType::F16, DType::BF16}) {
    Tensor x = randn_t(c.x, t, 11).requires_grad_(true);
    Tensor w = randn_t(c.w, t, 12).requires_grad_(true);
    Tensor y = conv2d(x, w, Tensor(), c.stride, c.padding, c.dilation, c.groups);
    CHECK(y.dtype() == t);
    Tensor y32 = conv2d(x.detach().to(DType::F32), w.detach().to(DType::F32), Tensor(), c.stride, c.padding, c.dilation,
                        c.groups);
    CHECK(allclose(y.to(DType::F32), y32, 2e-2, 5e-2));
    y.sum().backward();
    CHECK(x.grad().dtype() == t);
    CHECK(w.grad().dtype() == t);
  }
}

TEST_CASE("conv2d: f16 and bf16 without native kernels are the f32 kernels' results rounded once", "[conv]") {
  // bf16 where oneDNN's native bf16 kernels are not preferred, and f16 always: the f32 path (oneDNN's
  // f32 kernels, else im2col) on widened copies, values and both gradients, the bias's too
  Generator g(17);
  for (ConvCfg c : {ConvCfg{{4, 8, 10, 10}, {16, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
                    ConvCfg{{2, 4, 7, 6}, {6, 2, 3, 3}, {2, 1}, {1, 0}, {1, 1}, 2}}) {
    for (DType t : {DType::F16, DType::BF16}) {
      if (t == DType::BF16 && cpu::onednn_conv_enabled() && cpu::onednn_bf16_preferred()) continue;
      INFO("x " << str(c.x) << " w " << str(c.w) << " " << dtype_name(t));
      Tensor x = randn(c.x, DType::F32, &g).to(t), w = randn(c.w, DType::F32, &g).to(t),
             b = randn({c.w[0]}, DType::F32, &g).to(t);
      const auto f32 = [](const Tensor& v) { return v.to(DType::F32); };
      Tensor y = conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
      CHECK(equal(y, conv2d(f32(x), f32(w), f32(b), c.stride, c.padding, c.dilation, c.groups).to(t)));
      Attrs a = conv_attrs(c), ai = a, aw = a;
      ai.set("input_size", c.x);
      aw.set("weight_size", c.w);
      aw.set("bias", int64_t(1));
      Tensor gy = randn(y.sizes(), DType::F32, &g).to(t);
      CHECK(equal(dispatch1("conv2d_backward_input", {gy, w}, ai),
                  dispatch1("conv2d_backward_input", {f32(gy), f32(w)}, ai).to(t)));
      const std::vector<Tensor> gwb = dispatch("conv2d_backward_weight", {gy, x}, aw),
                                gwb32 = dispatch("conv2d_backward_weight", {f32(gy), f32(x)}, aw);
      REQUIRE(gwb.size() == 2);
      CHECK(equal(gwb[0], gwb32[0].to(t)));
      CHECK(equal(gwb[1], gwb32[1].to(t)));
    }
  }
}

TEST_CASE("conv2d: double backward through the backward ops", "[conv]") {
  // d/dx of <dL/dw, v> for L = <conv(x, w), gy>: dL/dw = Bw(gy, x) is linear in x, so its
  // gradient wrt x is Bin(gy, v); compare with the naive loops.
  ConvCfg c{{2, 3, 6, 5}, {4, 3, 3, 2}, {2, 1}, {1, 0}, {1, 2}, 1};
  Tensor x = randn_t(c.x, DType::F64, 20).requires_grad_(true);
  Tensor w = randn_t(c.w, DType::F64, 21).requires_grad_(true);
  Tensor y = conv2d(x, w, Tensor(), c.stride, c.padding, c.dilation, c.groups);
  Tensor gy = randn_t(y.sizes(), DType::F64, 22);
  Tensor v = randn_t(c.w, DType::F64, 23);
  y.backward(gy, false, true);
  Tensor dw = w.grad();
  REQUIRE(dw.requires_grad());
  x.zero_grad();
  (dw * v).sum().backward();
  Tensor ref = empty(c.x, DType::F64);
  cpu::conv2d_backward_input_naive(gy, v, ref, conv_attrs(c));
  CHECK(allclose(x.grad(), ref, 1e-10, 1e-10));
}

TEST_CASE("conv2d: errors name the op and the shapes", "[conv]") {
  using Catch::Matchers::Contains;
  Tensor x = zeros({2, 4, 5, 5});
  CHECK_THROWS_WITH(conv2d(zeros({4, 5, 5}), zeros({8, 4, 3, 3})),
                    Contains("conv2d") && Contains("4-D input") && Contains("[4, 5, 5]"));
  CHECK_THROWS_WITH(conv2d(x, zeros({8, 4, 3})), Contains("conv2d") && Contains("4-D weight") && Contains("[8, 4, 3]"));
  CHECK_THROWS_WITH(conv2d(x, zeros({8, 3, 3, 3})), Contains("conv2d") && Contains("[8, 3, 3, 3]") &&
                                                        Contains("3 channels") && Contains("[2, 4, 5, 5]") &&
                                                        Contains("with 4 channels"));
  CHECK_THROWS_WITH(conv2d(x, zeros({8, 1, 3, 3}), Tensor(), {1, 1}, {0, 0}, {1, 1}, 3),
                    Contains("conv2d") && Contains("groups=3") && Contains("4 input channels"));
  CHECK_THROWS_WITH(conv2d(zeros({2, 6, 5, 5}), zeros({8, 2, 3, 3}), Tensor(), {1, 1}, {0, 0}, {1, 1}, 3),
                    Contains("conv2d") && Contains("groups=3") && Contains("8 output channels"));
  CHECK_THROWS_WITH(conv2d(x, zeros({8, 4, 7, 3})), Contains("conv2d") && Contains("output size would be <= 0") &&
                                                        Contains("[8, 4, 7, 3]") && Contains("[2, 4, 5, 5]"));
  CHECK_THROWS_WITH(conv2d(x, zeros({8, 4, 3, 3}), Tensor(), {1, 1}, {0, 0}, {3, 3}),
                    Contains("output size would be <= 0") && Contains("(7 x 7)"));
  CHECK_THROWS_WITH(conv2d(x, zeros({8, 4, 3, 3}), Tensor(), {0, 1}), Contains("conv2d") && Contains("stride"));
  CHECK_THROWS_WITH(conv2d(x, zeros({8, 4, 3, 3}), Tensor(), {1, 1}, {-1, 0}), Contains("padding"));
  CHECK_THROWS_WITH(conv2d(x, zeros({8, 4, 3, 3}), Tensor(), {1, 2, 3}), Contains("stride") && Contains("[1, 2, 3]"));
  CHECK_THROWS_WITH(conv2d(x, zeros({8, 4, 3, 3}), zeros({4})), Contains("bias") && Contains("[4]"));
  CHECK_THROWS_WITH(conv2d(x, zeros({8, 4, 3, 3}, DType::F64)), Contains("conv2d") && Contains("same dtype"));
  CHECK_THROWS_WITH(conv2d(zeros({2, 4, 5, 5}, DType::I64), zeros({8, 4, 3, 3}, DType::I64)),
                    Contains("conv2d") && Contains("floating point"));
  // the backward ops check that grad_output fits
  Attrs a{{"stride", Pair{1, 1}},
          {"padding", Pair{0, 0}},
          {"dilation", Pair{1, 1}},
          {"groups", int64_t(1)},
          {"input_size", Shape{2, 4, 5, 5}}};
  CHECK_THROWS_WITH(dispatch1("conv2d_backward_input", {zeros({2, 8, 4, 4}), zeros({8, 4, 3, 3})}, a),
                    Contains("conv2d_backward_input") && Contains("[2, 8, 4, 4]") && Contains("[2, 8, 3, 3]"));
}

// ---------------------------------------------------------------- max_pool2d

TEST_CASE("max_pool2d: shapes and hand-checked values", "[pool]") {
  Tensor x = arange4({1, 1, 4, 4});
  CHECK(equal(max_pool2d(x, {2, 2}), t4({5, 7, 13, 15}, {1, 1, 2, 2})));  // stride defaults to kernel
  CHECK(equal(max_pool2d(x, {2}), t4({5, 7, 13, 15}, {1, 1, 2, 2})));
  CHECK(equal(max_pool2d(x, {3, 3}, {1, 1}), t4({10, 11, 14, 15}, {1, 1, 2, 2})));
  // dilation 2: the window of (0, 0) reads (0,0), (0,2), (2,0), (2,2)
  CHECK(equal(max_pool2d(x, {2, 2}, {1, 1}, {0, 0}, {2, 2}), t4({10, 11, 14, 15}, {1, 1, 2, 2})));
  // floor output size: 5 rows, kernel 2 stride 2 -> 2 rows (the last row is dropped)
  CHECK(max_pool2d(zeros({2, 3, 5, 7}), {2, 2}).sizes() == Shape{2, 3, 2, 3});
  CHECK(max_pool2d(zeros({2, 3, 5, 7}), {3, 2}, {2, 1}, {1, 1}).sizes() == Shape{2, 3, 3, 8});
}

TEST_CASE("max_pool2d: padding is -inf, indices are flat per plane", "[pool]") {
  // all values negative: zero padding would win, -inf padding does not
  Tensor x = -1.0 - arange4({1, 1, 3, 3});  // -1 .. -9
  auto r =
      dispatch("max_pool2d", {x},
               {{"kernel", Pair{3, 3}}, {"stride", Pair{2, 2}}, {"padding", Pair{1, 1}}, {"dilation", Pair{1, 1}}});
  CHECK(equal(r[0], t4({-1, -2, -4, -5}, {1, 1, 2, 2})));
  CHECK(r[1].dtype() == DType::I64);
  CHECK(equal(r[1], t4({0, 1, 3, 4}, {1, 1, 2, 2}, DType::I64)));
  CHECK(equal(max_pool2d(x, {3, 3}, {2, 2}, {1, 1}), r[0]));
  // ties: the first maximum in the window (row-major) is selected
  auto t =
      dispatch("max_pool2d", {ones({1, 1, 2, 2})},
               {{"kernel", Pair{2, 2}}, {"stride", Pair{2, 2}}, {"padding", Pair{0, 0}}, {"dilation", Pair{1, 1}}});
  CHECK(t[1].item() == 0);
}

TEST_CASE("max_pool2d: matches amax over non-overlapping windows", "[pool]") {
  Tensor x = randn_t({3, 5, 8, 6}, DType::F32, 30);
  Tensor ref = amax(x.reshape({3, 5, 4, 2, 3, 2}), {3, 5});
  CHECK(equal(max_pool2d(x, {2, 2}), ref));
  Tensor x64 = randn_t({2, 3, 6, 9}, DType::F64, 31);
  CHECK(equal(max_pool2d(x64, {3, 3}), amax(x64.reshape({2, 3, 2, 3, 3, 3}), {3, 5})));
}

TEST_CASE("max_pool2d: gradient goes to the argmax and accumulates over overlapping windows", "[pool]") {
  // the centre of a 3x3 input is the maximum of all four 2x2 windows (stride 1)
  Tensor x = t4({0, 1, 0, 2, 9, 3, 0, 4, 0}, {1, 1, 3, 3}).requires_grad_(true);
  max_pool2d(x, {2, 2}, {1, 1}).sum().backward();
  CHECK(equal(x.grad(), t4({0, 0, 0, 0, 4, 0, 0, 0, 0}, {1, 1, 3, 3})));
  // f16 runs and keeps its dtype
  Tensor h = randn_t({1, 2, 4, 4}, DType::F16, 32);
  CHECK(equal(max_pool2d(h, {2, 2}).to(DType::F32), max_pool2d(h.to(DType::F32), {2, 2})));
}

namespace {
// The plain window loop of max_pool2d (no padding, no dilation): value and flat index of the
// first maximum, a NaN replacing any number (torch's rule `v > best || isnan(v)`).
std::pair<std::vector<double>, std::vector<double>> max_pool_naive(const Tensor& x, Pair k, Pair s) {
  const int64_t P = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OH = (H - k[0]) / s[0] + 1, OW = (W - k[1]) / s[1] + 1;
  std::vector<double> v = x.contiguous().tolist(), y, idx;
  for (int64_t p = 0; p < P; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double best = -INFINITY;
        int64_t arg = oh * s[0] * W + ow * s[1];
        for (int64_t i = 0; i < k[0]; ++i)
          for (int64_t j = 0; j < k[1]; ++j) {
            int64_t at = (oh * s[0] + i) * W + ow * s[1] + j;
            double e = v[size_t(p * H * W + at)];
            if (e > best || std::isnan(e)) {
              best = e;
              arg = at;
            }
          }
        y.push_back(best);
        idx.push_back(double(arg));
      }
  return {y, idx};
}
}  // namespace

TEST_CASE("max_pool2d: the 2x2 window loop matches the plain loop, with ties, -inf and NaN", "[pool]") {
  Generator g(50);
  // width 37: rows of 18 stride-2 outputs, 16 of them through f32's 8-lane path, then 2 masked;
  // 14 and 7: rows of 7 and 3, masked only; 16: one full step
  for (Shape shape : {Shape{3, 4, 9, 7}, Shape{2, 3, 6, 37}, Shape{2, 3, 4, 14}, Shape{2, 3, 4, 16}}) {
    for (DType t : {DType::F32, DType::F64}) {
      // rounded values: many ties; a few -inf and NaN
      Tensor x = randint(-3, 4, shape, TensorOptions(DType::I64), &g).to(t);
      x.view({-1}).narrow(0, 5, 1).fill_(-INFINITY);
      x.view({-1}).narrow(0, 40, 1).fill_(NAN);
      x.view({-1}).narrow(0, 41, 1).fill_(NAN);
      x.view({-1}).narrow(0, 100, 2).fill_(NAN);
      x.view({-1}).narrow(0, 37 + 2, 1).fill_(NAN);  // the second input row of a window
      for (Pair s : {Pair{2, 2}, Pair{1, 1}, Pair{3, 2}, Pair{1, 3}}) {
        INFO("shape " << str(shape) << " stride " << str(s) << " dtype " << dtype_name(t));
        auto r = dispatch("max_pool2d", {x},
                          {{"kernel", Pair{2, 2}}, {"stride", s}, {"padding", Pair{0, 0}}, {"dilation", Pair{1, 1}}});
        auto [y, idx] = max_pool_naive(x, {2, 2}, s);
        std::vector<double> got = r[0].tolist();
        REQUIRE(got.size() == y.size());
        for (size_t i = 0; i < y.size(); ++i) {
          if (std::isnan(y[i]))
            CHECK(std::isnan(got[i]));
          else
            CHECK(got[i] == y[i]);
        }
        CHECK(r[1].tolist() == idx);
      }
    }
  }
}

TEST_CASE("max_pool2d_backward: routes gradients to the argmax, sums repeats, checks indices", "[pool]") {
  using Catch::Matchers::Contains;
  // plane 0: outputs 0 and 2 both chose element 4; plane 1: element 0 and 3
  Tensor gy = t4({1, 2, 3, 4, 5, 6}, {1, 2, 1, 3}, DType::F64);
  Tensor idx = t4({4, 1, 4, 0, 3, 3}, {1, 2, 1, 3}, DType::I64);
  Attrs a{{"input_size", Shape{1, 2, 2, 3}}};
  Tensor gx = dispatch1("max_pool2d_backward", {gy, idx}, a);
  CHECK(equal(gx, t4({0, 2, 0, 0, 4, 0, 4, 0, 0, 11, 0, 0}, {1, 2, 2, 3}, DType::F64)));
  CHECK_THROWS_WITH(dispatch1("max_pool2d_backward", {gy, t4({0, 1, 2, 3, 4, 6}, {1, 2, 1, 3}, DType::I64)}, a),
                    Contains("max_pool2d_backward") && Contains("outside"));
  CHECK_THROWS_WITH(dispatch1("max_pool2d_backward", {gy, idx.to(DType::F64)}, a),
                    Contains("max_pool2d_backward") && Contains("int64"));
  CHECK_THROWS_WITH(dispatch1("max_pool2d_backward", {gy, idx}, {{"input_size", Shape{2, 2, 2, 3}}}),
                    Contains("max_pool2d_backward") && Contains("[1, 2, 1, 3]"));
}

TEST_CASE("max_pool2d: errors", "[pool]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(max_pool2d(zeros({3, 4, 4}), {2, 2}),
                    Contains("max_pool2d") && Contains("4-D") && Contains("[3, 4, 4]"));
  CHECK_THROWS_WITH(max_pool2d(zeros({1, 1, 4, 4}), {2, 2}, {1, 1}, {2, 2}),
                    Contains("max_pool2d") && Contains("at most half"));
  CHECK_THROWS_WITH(max_pool2d(zeros({1, 1, 2, 2}), {3, 3}),
                    Contains("max_pool2d") && Contains("output size would be <= 0") && Contains("[1, 1, 2, 2]"));
  CHECK_THROWS_WITH(max_pool2d(zeros({1, 1, 4, 4}), {0, 2}), Contains("max_pool2d") && Contains("kernel_size"));
  CHECK_THROWS_WITH(max_pool2d(zeros({1, 1, 4, 4}, DType::I64), {2, 2}), Contains("floating point"));
}

// ---------------------------------------------------------------- avg_pool2d

TEST_CASE("avg_pool2d: hand-checked values and count_include_pad", "[pool]") {
  Tensor x = arange4({1, 1, 4, 4});
  CHECK(equal(avg_pool2d(x, {2, 2}), t4({2.5, 4.5, 10.5, 12.5}, {1, 1, 2, 2})));
  // ones, 3x3 window, padding 1: with the padding counted, corners see 4/9 and edges 6/9
  Tensor o = ones({1, 1, 3, 3}, DType::F64);
  CHECK(allclose(avg_pool2d(o, {3, 3}, {1, 1}, {1, 1}, true),
                 t4({4. / 9, 6. / 9, 4. / 9, 6. / 9, 1, 6. / 9, 4. / 9, 6. / 9, 4. / 9}, {1, 1, 3, 3}, DType::F64)));
  CHECK(allclose(avg_pool2d(o, {3, 3}, {1, 1}, {1, 1}, false), ones({1, 1, 3, 3}, DType::F64)));
  // uneven padding and stride: window (0, 0) covers rows -1..0 and columns -1..1 of arange 3x3
  Tensor a = arange4({1, 1, 3, 3}, DType::F64);
  // kernel {2, 3}, stride {2, 2}, padding {1, 1}: output 2x2
  Tensor yt = avg_pool2d(a, {2, 3}, {2, 2}, {1, 1}, true);
  Tensor yf = avg_pool2d(a, {2, 3}, {2, 2}, {1, 1}, false);
  CHECK(allclose(yt, t4({1. / 6, 3. / 6, 20. / 6, 24. / 6}, {1, 1, 2, 2}, DType::F64)));
  CHECK(allclose(yf, t4({1. / 2, 3. / 2, 20. / 4, 24. / 4}, {1, 1, 2, 2}, DType::F64)));
}

TEST_CASE("avg_pool2d: matches a depthwise conv2d with weights 1/k^2", "[pool]") {
  Tensor x = randn_t({3, 4, 9, 6}, DType::F64, 40);
  CHECK(allclose(avg_pool2d(x, {3, 3}), conv_pool_ref(x, 3), 1e-12, 1e-12));
  // with padding and count_include_pad, the conv's zero padding is the same average
  Tensor w = full({4, 1, 3, 3}, 1.0 / 9.0, DType::F64);
  CHECK(allclose(avg_pool2d(x, {3, 3}, {2, 1}, {1, 1}, true), conv2d(x, w, Tensor(), {2, 1}, {1, 1}, {1, 1}, 4), 1e-12,
                 1e-12));
}

TEST_CASE("avg_pool2d_backward is the adjoint of avg_pool2d", "[pool]") {
  for (bool cip : {true, false}) {
    Tensor x = randn_t({2, 3, 7, 6}, DType::F64, 41);
    Tensor y = avg_pool2d(x, {3, 2}, {2, 2}, {1, 1}, cip);
    Tensor g = randn_t(y.sizes(), DType::F64, 42);
    Attrs a{{"kernel", Pair{3, 2}},
            {"stride", Pair{2, 2}},
            {"padding", Pair{1, 1}},
            {"count_include_pad", cip},
            {"input_size", x.sizes()}};
    Tensor gx = dispatch1("avg_pool2d_backward", {g}, a);
    // <avg(x), g> = <x, avg_backward(g)>
    CHECK(std::abs((y * g).sum().item() - (x * gx).sum().item()) < 1e-10);
    // autograd uses the same op
    Tensor xr = x.clone().requires_grad_(true);
    avg_pool2d(xr, {3, 2}, {2, 2}, {1, 1}, cip).backward(g);
    CHECK(allclose(xr.grad(), gx, 1e-12, 1e-12));
  }
}

TEST_CASE("pooling: non-contiguous inputs", "[pool]") {
  Tensor xt = randn_t({2, 7, 6, 3}, DType::F64, 44).permute({0, 3, 1, 2});  // [2, 3, 7, 6], strided
  REQUIRE_FALSE(xt.is_contiguous());
  Tensor xc = xt.contiguous();
  CHECK(equal(max_pool2d(xt, {3, 2}, {2, 1}, {1, 1}), max_pool2d(xc, {3, 2}, {2, 1}, {1, 1})));
  CHECK(equal(avg_pool2d(xt, {3, 2}, {2, 1}, {1, 1}, false), avg_pool2d(xc, {3, 2}, {2, 1}, {1, 1}, false)));
}

TEST_CASE("avg_pool2d: f16, bf16 and errors", "[pool]") {
  using Catch::Matchers::Contains;
  for (DType t : {DType::F16, DType::BF16}) {
    Tensor x = randn_t({1, 2, 4, 4}, t, 43);
    Tensor y = avg_pool2d(x, {2, 2});
    CHECK(y.dtype() == t);
    CHECK(allclose(y.to(DType::F32), avg_pool2d(x.to(DType::F32), {2, 2}), 1e-2, 1e-2));
  }
  CHECK_THROWS_WITH(avg_pool2d(zeros({4, 4}), {2, 2}), Contains("avg_pool2d") && Contains("[4, 4]"));
  CHECK_THROWS_WITH(avg_pool2d(zeros({1, 1, 4, 4}), {2, 2}, {1, 1}, {2, 2}),
                    Contains("avg_pool2d") && Contains("at most half"));
  CHECK_THROWS_WITH(avg_pool2d(zeros({1, 1, 4, 1}), {2, 2}), Contains("avg_pool2d") && Contains("<= 0"));
  CHECK_THROWS_WITH(avg_pool2d(zeros({1, 1, 4, 4}), {2, 2}, {0, 1}), Contains("avg_pool2d") && Contains("stride"));
}

// ---------------------------------------------------------------- gradcheck cases (f64)

namespace {
Attrs geom(Pair s, Pair p, Pair d, int64_t g) {
  return {{"stride", s}, {"padding", p}, {"dilation", d}, {"groups", g}};
}
Outputs conv_bin(const Inputs& x, Shape input_size, Attrs a) {
  a.set("input_size", input_size);
  return {dispatch1("conv2d_backward_input", {x[0], x[1]}, a)};
}
Outputs conv_bw(const Inputs& x, Shape weight_size, Attrs a) {
  a.set("weight_size", weight_size);
  return {dispatch1("conv2d_backward_weight", {x[0], x[1]}, a)};
}
Outputs avg_bw(const Inputs& x, Pair k, Pair s, Pair p, bool cip, Shape input_size) {
  return {dispatch1(
      "avg_pool2d_backward", {x[0]},
      {{"kernel", k}, {"stride", s}, {"padding", p}, {"count_include_pad", cip}, {"input_size", input_size}})};
}
}  // namespace

TR_OP_CASE("conv2d", "3x3 padding 1", ({randn64({2, 4, 5, 5}, 201), randn64({3, 4, 3, 3}, 202)}), [](const Inputs& x) {
  return Outputs{conv2d(x[0], x[1], Tensor(), {1, 1}, {1, 1})};
});
TR_OP_CASE("conv2d", "stride, padding, dilation, groups, bias",
           ({randn64({2, 4, 5, 6}, 203), randn64({4, 2, 2, 3}, 204), randn64({4}, 205)}), [](const Inputs& x) {
             return Outputs{conv2d(x[0], x[1], x[2], {2, 1}, {1, 0}, {1, 2}, 2)};
           });
TR_OP_CASE("conv2d", "1x1 direct", ({randn64({2, 4, 3, 3}, 206), randn64({2, 4, 1, 1}, 207)}),
           [](const Inputs& x) { return Outputs{conv2d(x[0], x[1])}; });
TR_OP_CASE("conv2d_backward_input", "stride 2 leaves a row uncovered",
           ({randn64({2, 3, 2, 3}, 208), randn64({3, 2, 3, 2}, 209)}), [](const Inputs& x) {
             return conv_bin(x, {2, 2, 6, 5}, geom({2, 2}, {0, 1}, {1, 1}, 1));
           });
TR_OP_CASE("conv2d_backward_input", "dilation, groups", ({randn64({2, 4, 5, 3}, 210), randn64({4, 1, 2, 2}, 211)}),
           [](const Inputs& x) {
             return conv_bin(x, {2, 2, 5, 5}, geom({1, 2}, {1, 1}, {2, 1}, 2));
           });
TR_OP_CASE("conv2d_backward_weight", "stride 2 leaves a row uncovered",
           ({randn64({2, 3, 2, 3}, 212), randn64({2, 2, 6, 5}, 213)}), [](const Inputs& x) {
             return conv_bw(x, {3, 2, 3, 2}, geom({2, 2}, {0, 1}, {1, 1}, 1));
           });
TR_OP_CASE("conv2d_backward_weight", "dilation, groups", ({randn64({2, 4, 5, 3}, 214), randn64({2, 2, 5, 5}, 215)}),
           [](const Inputs& x) {
             return conv_bw(x, {4, 1, 2, 2}, geom({1, 2}, {1, 1}, {2, 1}, 2));
           });
TR_OP_CASE("conv2d_backward_weight", "with the bias gradient (its second output)",
           ({randn64({2, 3, 2, 3}, 225), randn64({2, 2, 6, 5}, 226)}), [](const Inputs& x) {
             Attrs a = geom({2, 2}, {0, 1}, {1, 1}, 1);
             a.set("weight_size", Shape{3, 2, 3, 2});
             a.set("bias", int64_t(1));
             return Outputs(dispatch("conv2d_backward_weight", {x[0], x[1]}, a));
           });
TR_OP_CASE("max_pool2d", "3x3 stride 2 padding 1", ({distinct64({2, 3, 5, 5}, 216)}), [](const Inputs& x) {
  return Outputs{max_pool2d(x[0], {3, 3}, {2, 2}, {1, 1})};
});
TR_OP_CASE("max_pool2d", "overlapping, dilation 2", ({distinct64({2, 2, 5, 6}, 217)}), [](const Inputs& x) {
  return Outputs{max_pool2d(x[0], {2, 3}, {1, 2}, {1, 1}, {2, 1})};
});
TR_OP_CASE("max_pool2d", "2x2 window loop", ({distinct64({2, 3, 4, 6}, 222)}), [](const Inputs& x) {
  return Outputs{max_pool2d(x[0], {2, 2})};
});
TR_OP_CASE(
    "max_pool2d_backward", "indices of a 3x3 stride 2 pooling", ({randn64({2, 3, 3, 3}, 223)}), [](const Inputs& x) {
      Tensor idx = dispatch(
          "max_pool2d", {distinct64({2, 3, 5, 5}, 224).detach().to(x[0].device())},
          {{"kernel", Pair{3, 3}}, {"stride", Pair{2, 2}}, {"padding", Pair{1, 1}}, {"dilation", Pair{1, 1}}})[1];
      return Outputs{dispatch1("max_pool2d_backward", {x[0], idx}, {{"input_size", Shape{2, 3, 5, 5}}})};
    });
TR_OP_CASE("avg_pool2d", "count_include_pad", ({randn64({2, 3, 5, 5}, 218)}), [](const Inputs& x) {
  return Outputs{avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}, true)};
});
TR_OP_CASE("avg_pool2d", "exclude padding, uneven", ({randn64({2, 3, 5, 6}, 219)}), [](const Inputs& x) {
  return Outputs{avg_pool2d(x[0], {2, 3}, {1, 2}, {1, 1}, false)};
});
TR_OP_CASE("avg_pool2d_backward", "count_include_pad", ({randn64({2, 3, 3, 3}, 220)}), [](const Inputs& x) {
  return avg_bw(x, {3, 3}, {2, 2}, {1, 1}, true, {2, 3, 5, 5});
});
TR_OP_CASE("avg_pool2d_backward", "exclude padding, uneven", ({randn64({2, 3, 6, 3}, 221)}), [](const Inputs& x) {
  return avg_bw(x, {2, 3}, {1, 2}, {1, 1}, false, {2, 3, 5, 6});
});

}  // namespace test_conv_pool
