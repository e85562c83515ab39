// The fused batch norm + relu + max pool (batch_norm_relu_max_pool2d and its backward) against the
// chain it replaces (backends::fusion() off: batch_norm -> relu -> max_pool2d): outputs, statistics
// and all three gradients bit for bit, on the f32 2x2 stride-2 path (odd sizes, ties, zeros, a
// channel that the relu zeroes) and the general windows (overlapping, padded), in f64 and bf16, at
// any thread count; Sequential's BatchNorm2d + ReLU + MaxPool2d run as the fused op in training (the
// running statistics too) and as the chain in eval or under a hook; errors; gradcheck cases.
#include <catch2/catch.hpp>
#include <omp.h>
#include <cmath>
#include "autograd/node.h"
#include "core/cuda_hooks.h"
#include "fusion_switch.h"
#include "nn/layers/batch_norm.h"
#include "nn/layers/max_pool2d.h"
#include "nn/layers/relu.h"
#include "nn/layers/sequential.h"
#include "op_cases.h"
#include "ops/backends.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "require_gpu.h"

namespace test_batch_norm_relu_pool {

using namespace tr;
using namespace tr::test;

namespace {

struct Window {
  Pair kernel, stride, padding, dilation;
};

// y, the statistics and the gradients of x, weight and bias for an output gradient gy
struct Result {
  Tensor y, mean, var, gx, gw, gb;
};

Result run(const Tensor& x, const Tensor& w, const Tensor& b, const Window& win, uint64_t seed) {
  Tensor xr = x.detach().requires_grad_(true), wr = w.detach().requires_grad_(true),
         br = b.detach().requires_grad_(true);
  BatchNormOut r = batch_norm_relu_max_pool2d(xr, wr, br, 1e-5, win.kernel, win.stride, win.padding, win.dilation);
  Generator gen(seed);
  Tensor gy = randn(r.output.sizes(), TensorOptions(DType::F32), &gen).to(x.dtype()).to(x.device());
  r.output.backward(gy);
  return {r.output.detach(), r.mean, r.var, xr.grad(), wr.grad(), br.grad()};
}

// the chain's numbers (fusion off), then the fused op's
std::pair<Result, Result> chain_and_fused(const Tensor& x, const Tensor& w, const Tensor& b, const Window& win) {
  return unfused_and_fused([&] { return run(x, w, b, win, 3); });
}

// equal values, NaN where the other has NaN
bool same(const Tensor& a, const Tensor& b) {
  const Tensor na = isnan(a), nb = isnan(b), zero = zeros({}, TensorOptions(a.dtype()).device(a.device()));
  return equal(na, nb) && equal(where(na, zero, a), where(nb, zero, b));
}

void check_equal(const Result& a, const Result& b) {
  CHECK(same(a.y, b.y));
  CHECK(same(a.mean, b.mean));
  CHECK(same(a.var, b.var));
  CHECK(same(a.gx, b.gx));
  CHECK(same(a.gw, b.gw));
  CHECK(same(a.gb, b.gb));
}

// x [N, C, H, W] in quarters (ties within windows, exact zeros after a batch norm of a symmetric
// channel are likely), with channel 1 shifted far below zero so that the relu zeroes its windows
Tensor quantized_input(const Shape& s, DType t, uint64_t seed) {
  Generator gen(seed);
  Tensor x = randn(s, TensorOptions(DType::F64), &gen).contiguous();
  for (double *p = x.data_ptr<double>(), *e = p + x.numel(); p != e; ++p) *p = std::round(*p * 4.0) / 4.0;
  return x.to(t);
}

Tensor weights(int64_t c, DType t, uint64_t seed) {
  Generator gen(seed);
  Tensor w = rand({c}, TensorOptions(DType::F64), &gen) + 0.5;
  if (c > 1) w.narrow(0, 1, 1).fill_(-2.0);  // a negative scale: the relu keeps the below-mean values
  return w.to(t);
}

const Window k2{{2, 2}, {2, 2}, {0, 0}, {1, 1}};

}  // namespace

TEST_CASE("batch_norm_relu_max_pool2d: the fused op equals the chain bit for bit (f32, 2x2 stride 2)",
          "[batch_norm][pool][fused]") {
  for (Shape s : {Shape{4, 3, 8, 8}, Shape{3, 2, 7, 7}, Shape{2, 5, 14, 14}, Shape{5, 3, 9, 16}, Shape{2, 4, 28, 28},
                  Shape{1, 2, 3, 2}}) {
    INFO("shape " << str(s));
    Tensor x = quantized_input(s, DType::F32, 11), w = weights(s[1], DType::F32, 12);
    Generator gen(13);
    Tensor b = randn({s[1]}, TensorOptions(DType::F32), &gen) * 0.5;
    auto [chain, fused] = chain_and_fused(x, w, b, k2);
    check_equal(chain, fused);
    CHECK(fused.y.sizes() == Shape{s[0], s[1], s[2] / 2, s[3] / 2});
  }
}

TEST_CASE("batch_norm_relu_max_pool2d: general windows, f64 and bf16 equal the chain", "[batch_norm][pool][fused]") {
  const std::vector<Window> windows = {
      {{3, 3}, {2, 2}, {1, 1}, {1, 1}},  // overlapping and padded: the scatter sums repeats
      {{2, 2}, {1, 1}, {0, 0}, {1, 1}},  // 2x2 of stride 1
      {{2, 3}, {2, 1}, {0, 1}, {2, 1}},  // dilated rows
  };
  for (const Window& win : windows) {
    INFO("kernel " << str(win.kernel) << " stride " << str(win.stride) << " padding " << str(win.padding));
    Tensor x = quantized_input({3, 3, 9, 10}, DType::F32, 21), w = weights(3, DType::F32, 22);
    Tensor b = tensor({0.1, -0.3, 0.2}).to(DType::F32);
    auto [chain, fused] = chain_and_fused(x, w, b, win);
    check_equal(chain, fused);
  }
  for (DType t : {DType::F64, DType::BF16}) {
    INFO(dtype_name(t));
    Tensor x = quantized_input({3, 2, 6, 7}, t, 31), w = weights(2, t, 32), b = tensor({0.25, -0.5}).to(t);
    auto [chain, fused] = chain_and_fused(x, w, b, k2);
    check_equal(chain, fused);
    CHECK(fused.y.dtype() == t);
  }
}

TEST_CASE("batch_norm_relu_max_pool2d: NaN and the relu's mask as the chain's", "[batch_norm][pool][fused]") {
  // a NaN in one window of a channel poisons that channel's statistics: every output is NaN, and
  // NaN outputs pass no gradient (threshold_backward: NaN > 0 is false), while the other channel
  // keeps its numbers
  Tensor x = quantized_input({2, 2, 4, 4}, DType::F32, 41).contiguous();
  x.data_ptr<float>()[((0 * 2 + 1) * 4 + 2) * 4 + 3] = NAN;
  Tensor w = weights(2, DType::F32, 42), b = zeros({2});
  auto [chain, fused] = chain_and_fused(x, w, b, k2);
  check_equal(chain, fused);
  CHECK(std::isnan(fused.y.select(1, 1).sum().item()));
  CHECK(std::isfinite(fused.y.select(1, 0).sum().item()));
}

TEST_CASE("batch_norm_relu_max_pool2d: results do not depend on the thread count", "[batch_norm][pool][fused]") {
  Tensor x = quantized_input({16, 8, 14, 14}, DType::F32, 51), w = weights(8, DType::F32, 52), b = zeros({8});
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Result one = run(x, w, b, k2, 5);
  omp_set_num_threads(std::max(threads, 2));
  Result many = run(x, w, b, k2, 5);
  omp_set_num_threads(threads);
  check_equal(one, many);
}

TEST_CASE("batch_norm_relu_max_pool2d: the fused op and its fused backward are the ones taken",
          "[batch_norm][pool][fused]") {
  Tensor x = quantized_input({2, 2, 4, 4}, DType::F32, 61).requires_grad_(true);
  BatchNormOut r = batch_norm_relu_max_pool2d(x, Tensor(), Tensor(), 1e-5, {2, 2});
  CHECK(grad_fn_name(r.output) == "BatchNormReluMaxPool2dBackward0");
  CHECK_FALSE(r.mean.requires_grad());
  BatchNormOut c = unfused([&] { return batch_norm_relu_max_pool2d(x, Tensor(), Tensor(), 1e-5, {2, 2}); });
  CHECK(grad_fn_name(c.output) == "MaxPool2dBackward0");
  CHECK(equal(r.output, c.output));
}

TEST_CASE("batch_norm_relu_max_pool2d_backward: errors name the op, the shapes and bad indices",
          "[batch_norm][pool][fused]") {
  Tensor x = randn({2, 3, 4, 4}), w = ones({3});
  Attrs a{
      {"eps", 1e-5}, {"kernel", Pair{2, 2}}, {"stride", Pair{2, 2}}, {"padding", Pair{0, 0}}, {"dilation", Pair{1, 1}}};
  std::vector<Tensor> r = dispatch("batch_norm_relu_max_pool2d", {x, w, zeros({3})}, a);
  Tensor gy = ones(r[0].sizes()), y = ones(r[0].sizes());
  Tensor bad = r[1].clone();
  int64_t* last = bad.data_ptr<int64_t>() + bad.numel() - 1;  // plane (1, 2), window (1, 1)
  *last = 16;
  CHECK_THROWS_WITH(dispatch("batch_norm_relu_max_pool2d_backward", {gy, x, w, r[2], r[3], y, bad}, a),
                    Catch::Contains("an index is outside the 4 x 4 input plane"));
  *last = -1;
  CHECK_THROWS_WITH(dispatch("batch_norm_relu_max_pool2d_backward", {gy, x, w, r[2], r[3], y, bad}, a),
                    Catch::Contains("outside"));
  CHECK_THROWS_WITH(dispatch("batch_norm_relu_max_pool2d_backward", {gy, x, w, r[2], r[3], y, r[1].to(DType::I32)}, a),
                    Catch::Contains("must be int64"));
  CHECK_THROWS_WITH(dispatch("batch_norm_relu_max_pool2d", {x, ones({2}), zeros({3})}, a),
                    Catch::Contains("weight (float32, shape [2]) must be [3]"));
  CHECK_THROWS_WITH(batch_norm_relu_max_pool2d(randn({1, 3, 1, 1}), w, zeros({3}), 1e-5, {1, 1}),
                    Catch::Contains("more than 1 value per channel"));
}

TEST_CASE("Sequential runs BatchNorm2d + ReLU + MaxPool2d as the fused op in training, the chain in eval",
          "[batch_norm][pool][layers]") {
  auto make = [] {
    auto seq = std::make_shared<nn::Sequential>();
    auto bn = std::make_shared<nn::BatchNorm2d>(3);
    {
      NoGradGuard ng;
      bn->weight.copy_(tensor({1.5, -0.5, 0.75}).to(DType::F32));
      bn->bias.copy_(tensor({0.1, 0.2, -0.3}).to(DType::F32));
    }
    seq->push_back(bn).push_back(std::make_shared<nn::ReLU>()).push_back(std::make_shared<nn::MaxPool2d>(Pair{2, 2}));
    return std::make_pair(seq, bn);
  };
  auto [fused_seq, fused_bn] = make();
  auto [chain_seq, chain_bn] = make();
  Tensor x = quantized_input({4, 3, 6, 6}, DType::F32, 71);
  for (int step = 0; step < 2; ++step) {
    Tensor yf = (*fused_seq)(x);
    Tensor yc = unfused([&, seq = chain_seq] { return (*seq)(x); });
    CHECK(grad_fn_name(yf) == "BatchNormReluMaxPool2dBackward0");
    CHECK(grad_fn_name(yc) == "MaxPool2dBackward0");
    CHECK(equal(yf, yc));
    yf.sum().backward();
    yc.sum().backward();
  }
  CHECK(equal(fused_bn->running_mean, chain_bn->running_mean));
  CHECK(equal(fused_bn->running_var, chain_bn->running_var));
  CHECK(fused_bn->num_batches_tracked.item() == 2);
  CHECK(equal(fused_bn->weight.grad(), chain_bn->weight.grad()));
  CHECK(equal(fused_bn->bias.grad(), chain_bn->bias.grad()));
  // eval: the running statistics, through the chain
  fused_seq->eval();
  chain_seq->eval();
  Tensor ye = (*fused_seq)(x);
  CHECK(equal(ye, max_pool2d(relu((*chain_bn)(x)), {2, 2})));
  // a hook on the relu needs its output: the chain runs
  fused_seq->train();
  Tensor seen;
  (*fused_seq)[1]->register_forward_hook([&](nn::Module&, const std::vector<Tensor>&, const Tensor& out) {
    seen = out;
    return Tensor();
  });
  Tensor yh = (*fused_seq)(x);
  REQUIRE(seen.defined());
  CHECK(seen.sizes() == Shape{4, 3, 6, 6});
  CHECK(grad_fn_name(yh) == "MaxPool2dBackward0");
}

TEST_CASE("cuda: batch_norm_relu_max_pool2d equals the chain on the device and the CPU's numbers",
          "[gpu][batch_norm][pool]") {
  TR_REQUIRE_GPU();
  const Device dev(DeviceType::CUDA, 0);
  REQUIRE(has_kernel("batch_norm_relu_max_pool2d", dev));
  const std::vector<std::pair<Shape, Window>> cases = {{{4, 3, 8, 8}, k2},
                                                       {{3, 2, 7, 9}, k2},
                                                       {{2, 3, 9, 10}, {{3, 3}, {2, 2}, {1, 1}, {1, 1}}},
                                                       {{2, 2, 6, 7}, {{2, 3}, {2, 1}, {0, 1}, {2, 1}}}};
  for (auto& [s, win] : cases) {
    INFO("shape " << str(s) << " kernel " << str(win.kernel));
    Tensor x = quantized_input(s, DType::F32, 81), w = weights(s[1], DType::F32, 82);
    Tensor b = zeros({s[1]}) + 0.125;
    auto [chain, fused] = chain_and_fused(x.to(dev), w.to(dev), b.to(dev), win);
    check_equal(chain, fused);
    Result cpu = run(x, w, b, win, 3);
    for (auto [got, want] : {std::pair{fused.y, cpu.y},
                             {fused.mean, cpu.mean},
                             {fused.var, cpu.var},
                             {fused.gx, cpu.gx},
                             {fused.gw, cpu.gw},
                             {fused.gb, cpu.gb}})
      CHECK(allclose(got.cpu(), want, 1e-5, 1e-5));
  }
}

TR_OP_CASE("batch_norm_relu_max_pool2d", "2x2 stride 2",
           ({randn64({3, 2, 4, 5}, 291), uniform64({2}, 0.5, 1.5, 292), randn64({2}, 293)}), [](const Inputs& x) {
             return Outputs{batch_norm_relu_max_pool2d(x[0], x[1], x[2], 1e-5, {2, 2}).output};
           });
TR_OP_CASE("batch_norm_relu_max_pool2d", "3x3 stride 2 padding 1, no affine", ({randn64({2, 3, 5, 5}, 294)}),
           [](const Inputs& x) {
             return Outputs{batch_norm_relu_max_pool2d(x[0], Tensor(), Tensor(), 1e-3, {3, 3}, {2, 2}, {1, 1}).output};
           });

}  // namespace test_batch_norm_relu_pool
