// The fused attention over packed q, k, v (attention_qkvpacked and its backward): against the
// composite chain it replaces (fusion off), against the row formulas of ops/attention_math.h,
// causal and not, on shapes with partial micro-kernel blocks; the online softmax over key tiles
// (what the CUDA kernels run) against the row formula; gradcheck and gradgradcheck (the second
// order runs the composite backward); thread-count independence and the argument checks. [gpu]:
// the FlashAttention-2 kernels against the CPU kernel in f64 and f32 on partial tiles, in bf16 and
// f16 against f64 of the rounded inputs, deterministic, gradcheck on CUDA, and under autocast.
#include <catch2/catch.hpp>
#include <omp.h>
#include <functional>
#include "op_cases.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "require_gpu.h"
#include "ops/attention_math.h"
#include "ops/autocast.h"
#include "ops/backends.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace test_attention_op {

using namespace tr;
using namespace tr::test;
using Catch::Matchers::Contains;

namespace {

struct Result {
  Tensor y, dqkv, lse;
};

// Sets attention's path (fused: the fused op wherever it has a kernel; else the composite chain)
// in a scope.
struct AttentionPathGuard {
  backends::Fusion saved = backends::fusion();
  explicit AttentionPathGuard(bool fused) {
    backends::fusion().enabled = true;
    backends::fusion().attention = fused ? backends::AttentionPath::Fused : backends::AttentionPath::Composite;
  }
  ~AttentionPathGuard() { backends::fusion() = saved; }
};

// y = attention(qkv) and the gradient of sum(y gy) by qkv, fused or composite.
Result run(const Tensor& qkv0, const Tensor& gy, int64_t heads, bool causal, bool fused) {
  AttentionPathGuard path(fused);
  Tensor qkv = qkv0.detach().requires_grad_(true);
  Result r;
  r.y = attention_qkvpacked(qkv, heads, causal);
  r.y.backward(gy);
  r.y = r.y.detach();
  r.dqkv = qkv.grad();
  return r;
}

double max_diff(const Tensor& a, const Tensor& b) {
  return max((a.to(kCPU).to(DType::F64) - b.to(kCPU).to(DType::F64)).abs()).item();
}
double max_abs(const Tensor& a) { return max(a.to(kCPU).to(DType::F64).abs()).item(); }

// The row formulas of attention_math.h over the whole tensor (f64): y, lse and dqkv.
Result rows_reference(const Tensor& qkv, const Tensor& gy, int64_t heads, bool causal) {
  const attn::Geometry g = attn::Geometry::of(qkv.size(0), qkv.size(1), qkv.size(2), heads,
                                              1.0 / std::sqrt(double(qkv.size(2) / 3 / heads)), causal);
  Tensor q = qkv.to(DType::F64).contiguous(), dy = gy.to(DType::F64).contiguous();
  Tensor y = zeros({g.B, g.T, g.C()}, DType::F64), lse = zeros({g.B, g.H, g.T}, DType::F64), dq = zeros_like(q);
  const double* pq = q.data_ptr<double>();
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t h = 0; h < g.H; ++h)
      for (int64_t i = 0; i < g.T; ++i)
        attn::forward_row<double, double>(g, pq, y.data_ptr<double>(), lse.data_ptr<double>(), b, h, i);
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t h = 0; h < g.H; ++h)
      for (int64_t i = 0; i < g.T; ++i) {
        attn::backward_q_row<double, double>(g, dy.data_ptr<double>(), pq, y.data_ptr<double>(), lse.data_ptr<double>(),
                                             dq.data_ptr<double>(), b, h, i);
        attn::backward_kv_row<double, double>(g, dy.data_ptr<double>(), pq, y.data_ptr<double>(),
                                              lse.data_ptr<double>(), dq.data_ptr<double>(), b, h, i);
      }
  return {y, dq, lse};
}

}  // namespace

TEST_CASE("attention_qkvpacked and its backward equal the composite and the row formulas", "[attention]") {
  // T = 1, T not a multiple of the 4-row / 16-column blocks, T = 128 (the GPT's), head dims 1, 5, 32
  struct Case {
    int64_t B, T, H, D;
  };
  for (Case s : {Case{1, 1, 1, 1}, Case{2, 7, 3, 5}, Case{1, 21, 2, 16}, Case{2, 37, 1, 24}, Case{1, 128, 4, 32}}) {
    for (bool causal : {true, false}) {
      for (DType t : {DType::F64, DType::F32}) {
        INFO("B=" << s.B << " T=" << s.T << " H=" << s.H << " D=" << s.D << " causal=" << causal << " "
                  << dtype_name(t));
        Generator gen(5);
        Tensor qkv = randn({s.B, s.T, 3 * s.H * s.D}, t, &gen) * 1.5, gy = randn({s.B, s.T, s.H * s.D}, t, &gen);
        Result fused = run(qkv, gy, s.H, causal, true), comp = run(qkv, gy, s.H, causal, false);
        Result rows = rows_reference(qkv, gy, s.H, causal);
        const double tol = t == DType::F64 ? 1e-11 : 2e-5;
        CHECK(allclose(fused.y, comp.y, tol, tol));
        CHECK(allclose(fused.dqkv, comp.dqkv, tol, tol));
        CHECK(allclose(fused.y.to(DType::F64), rows.y, tol, tol));
        CHECK(allclose(fused.dqkv.to(DType::F64), rows.dqkv, tol, tol));
      }
    }
  }
}

TEST_CASE("attention_qkvpacked: the fused op is the one taken, and lse is each row's log-sum-exp", "[attention]") {
  Generator gen(6);
  Tensor qkv = randn({2, 5, 12}, DType::F64, &gen);  // 2 heads of 2
  auto r = dispatch("attention_qkvpacked", {qkv}, {{"n_head", int64_t(2)}, {"causal", true}, {"scale", 0.5}});
  // head 1 of batch 0, row 3: log S_{j <= 3} exp(0.5 q_3 . k_j)
  auto at = [&](int64_t i, int64_t c) { return qkv.select(0, 0).select(0, i).select(0, c).item(); };
  double s = 0;
  for (int64_t j = 0; j <= 3; ++j) s += std::exp(0.5 * (at(3, 2) * at(j, 6) + at(3, 3) * at(j, 7)));
  CHECK(r[1].select(0, 0).select(0, 1).select(0, 3).item() == Approx(std::log(s)).epsilon(1e-12));
  // row 0 sees only key 0: y_0 = v_0
  CHECK(r[0].select(0, 0).select(0, 0).select(0, 2).item() == Approx(at(0, 10)).epsilon(1e-12));
}

TEST_CASE("attention_qkvpacked: results do not depend on the thread count", "[attention]") {
  Generator gen(7);
  Tensor qkv = randn({3, 50, 48}, DType::F32, &gen), gy = randn({3, 50, 16}, DType::F32, &gen);
  const int nt = omp_get_max_threads();
  omp_set_num_threads(1);
  Result one = run(qkv, gy, 2, true, true);
  omp_set_num_threads(std::max(2, nt));
  Result many = run(qkv, gy, 2, true, true);
  omp_set_num_threads(nt);
  CHECK(equal(one.y, many.y));
  CHECK(equal(one.dqkv, many.dqkv));
}

TEST_CASE("attention_qkvpacked: argument checks", "[attention]") {
  CHECK_THROWS_WITH(attention_qkvpacked(randn({2, 3, 10}), 2, true), Contains("[B, T, 3C]"));
  CHECK_THROWS_WITH(attention_qkvpacked(randn({2, 3, 12}), 3, true),
                    Contains("n_head = 3 must be positive and divide C = 4"));
  CHECK_THROWS_WITH(attention_qkvpacked(randn({3, 12}), 2, true), Contains("got shape [3, 12]"));
  // dropout in training takes the composite chain; in eval the fused op
  Tensor qkv = randn({1, 4, 12});
  CHECK(allclose(attention_qkvpacked(qkv, 2, true, 0.5, false), attention_qkvpacked(qkv, 2, true), 1e-6, 1e-6));
}

TR_OP_CASE("attention_qkvpacked", "causal, 2 heads", ({randn64({2, 5, 12}, 280)}),
           [](const Inputs& x) { return Outputs{attention_qkvpacked(x[0], 2, true)}; });
TR_OP_CASE("attention_qkvpacked", "not causal, 1 head", ({randn64({1, 6, 9}, 281)}),
           [](const Inputs& x) { return Outputs{attention_qkvpacked(x[0], 1, false)}; });

TEST_CASE("attention_math: the online softmax over key tiles equals the row formula", "[attention]") {
  struct Case {
    int64_t B, T, H, D;
  };
  for (Case s : {Case{1, 1, 1, 3}, Case{2, 13, 2, 4}, Case{1, 40, 1, 8}}) {
    for (bool causal : {true, false}) {
      for (int64_t tile : {1, 4, 16, 64}) {
        INFO("T=" << s.T << " causal=" << causal << " tile=" << tile);
        Generator gen(11);
        Tensor qkv = randn({s.B, s.T, 3 * s.H * s.D}, DType::F64, &gen) * 2.0;
        const attn::Geometry g = attn::Geometry::of(s.B, s.T, 3 * s.H * s.D, s.H, 0.7, causal);
        Tensor y = zeros({s.B, s.T, s.H * s.D}, DType::F64), lse = zeros({s.B, s.H, s.T}, DType::F64);
        Tensor yt = zeros_like(y), lset = zeros_like(lse);
        std::vector<double> o(size_t(s.D));
        for (int64_t b = 0; b < s.B; ++b)
          for (int64_t h = 0; h < s.H; ++h)
            for (int64_t i = 0; i < s.T; ++i) {
              attn::forward_row<double, double>(g, qkv.data_ptr<double>(), y.data_ptr<double>(), lse.data_ptr<double>(),
                                                b, h, i);
              attn::forward_row_tiled<double, double>(g, qkv.data_ptr<double>(), yt.data_ptr<double>(),
                                                      lset.data_ptr<double>(), b, h, i, tile, o.data());
            }
        CHECK(max_diff(yt, y) < 1e-12);
        CHECK(max_diff(lset, lse) < 1e-12);
      }
    }
  }
}

TEST_CASE("attention_math: the tile rules and a row that meets a wholly masked tile first", "[attention]") {
  const attn::Geometry g = attn::Geometry::of(1, 10, 6, 1, 1.0, true);
  CHECK(g.visible(3, 3));
  CHECK_FALSE(g.visible(3, 4));
  CHECK_FALSE(g.visible(10, 0));  // a padding row of the last tile
  CHECK_FALSE(g.visible(9, 10));  // a padding key
  CHECK(g.tile_keys_end(0, 4) == 4);
  CHECK(g.tile_keys_end(8, 4) == 10);  // clamped to T
  CHECK(attn::Geometry::of(1, 10, 6, 1, 1.0, false).tile_keys_end(0, 4) == 10);
  // m = -inf after a masked tile: its exponentials are 0, not NaN, and the next tile starts afresh
  attn::OnlineSoftmax<double> st;
  CHECK(st.enter(-INFINITY) == 0.0);
  CHECK(st.p(-INFINITY) == 0.0);
  st.add(0.0);
  CHECK(st.enter(2.0) == 0.0);
  st.add(st.p(2.0) + st.p(1.0));
  const double alpha = st.enter(3.0);
  CHECK(alpha == Approx(std::exp(-1.0)).epsilon(1e-15));
  st.add(st.p(3.0));
  CHECK(st.lse() == Approx(std::log(std::exp(2.0) + std::exp(1.0) + std::exp(3.0))).epsilon(1e-15));
}

TEST_CASE("attention_qkvpacked: the composite chain's kept causal mask, a corner of a larger one", "[attention]") {
  // T = 12 keeps a [12, 12] mask; T = 5 then takes its corner
  for (int64_t T : {12, 5, 12}) {
    Generator gen(12);
    Tensor qkv = randn({2, T, 12}, DType::F64, &gen), gy = randn({2, T, 4}, DType::F64, &gen);
    Result fused = run(qkv, gy, 2, true, true), comp = run(qkv, gy, 2, true, false);
    CHECK(max_diff(fused.y, comp.y) < 1e-12);
    CHECK(max_diff(fused.dqkv, comp.dqkv) < 1e-12);
  }
}

namespace {

struct GpuCase {
  int64_t B, T, H, D;
};
// Partial tiles (T not a multiple of any tile, T below one, T = 1), head dims 16, 64 and 80 (the
// 128 bucket, zero-padded), B x H > 1; small, for the emulator.
const GpuCase kGpuCases[] = {{1, 1, 1, 16}, {2, 37, 2, 16}, {1, 150, 1, 64}, {2, 70, 2, 80}, {1, 9, 3, 64}};

// The fused op's y and lse on `dev` (dispatch directly: lse is not the API's).
Result fused_forward(const Tensor& qkv, int64_t heads, bool causal) {
  const double scale = 1.0 / std::sqrt(double(qkv.size(2) / 3 / heads));
  auto r = dispatch("attention_qkvpacked", {qkv}, {{"n_head", heads}, {"causal", causal}, {"scale", scale}});
  return {r[0], Tensor(), r[1]};
}

}  // namespace

TEST_CASE("cuda: the flash kernels equal the CPU kernel in f64 and f32 on partial tiles", "[gpu][attention]") {
  TR_REQUIRE_GPU();
  const Device cuda(DeviceType::CUDA, 0);
  for (const GpuCase& s : kGpuCases) {
    for (bool causal : {true, false}) {
      for (DType t : {DType::F64, DType::F32}) {
        INFO("B=" << s.B << " T=" << s.T << " H=" << s.H << " D=" << s.D << " causal=" << causal << " "
                  << dtype_name(t));
        Generator gen(8);
        Tensor qkv = randn({s.B, s.T, 3 * s.H * s.D}, t, &gen) * 1.5, gy = randn({s.B, s.T, s.H * s.D}, t, &gen);
        Result cpu = run(qkv, gy, s.H, causal, true);
        Result gpu = run(qkv.to(cuda), gy.to(cuda), s.H, causal, true);
        CHECK(gpu.y.device().is_cuda());
        CHECK(gpu.y.dtype() == t);
        const double tol = t == DType::F64 ? 1e-9 : 1e-5;
        CHECK(max_diff(gpu.y, cpu.y) < tol * std::max(1.0, max_abs(cpu.y)));
        CHECK(max_diff(gpu.dqkv, cpu.dqkv) < tol * std::max(1.0, max_abs(cpu.dqkv)));
        const Result lc = fused_forward(qkv, s.H, causal), lg = fused_forward(qkv.to(cuda), s.H, causal);
        CHECK(lg.lse.dtype() == t);
        CHECK(max_diff(lg.lse, lc.lse) < tol * std::max(1.0, max_abs(lc.lse)));
      }
    }
  }
}

TEST_CASE("cuda: the flash kernels equal the composite chain on the device, and repeat bit for bit",
          "[gpu][attention]") {
  TR_REQUIRE_GPU();
  const Device cuda(DeviceType::CUDA, 0);
  for (bool causal : {true, false}) {
    Generator gen(13);
    Tensor qkv = randn({2, 45, 3 * 2 * 32}, DType::F64, &gen).to(cuda),
           gy = randn({2, 45, 64}, DType::F64, &gen).to(cuda);
    Result fused = run(qkv, gy, 2, causal, true), again = run(qkv, gy, 2, causal, true);
    Result comp = run(qkv, gy, 2, causal, false);
    CHECK(max_diff(fused.y, comp.y) < 1e-10);
    CHECK(max_diff(fused.dqkv, comp.dqkv) < 1e-10);
    CHECK(equal(fused.y.to(kCPU), again.y.to(kCPU)));
    CHECK(equal(fused.dqkv.to(kCPU), again.dqkv.to(kCPU)));
  }
}

TEST_CASE("cuda: the flash kernels in bf16 and f16, within 16-bit rounding of f64", "[gpu][attention]") {
  TR_REQUIRE_GPU();
  const Device cuda(DeviceType::CUDA, 0);
  for (const GpuCase& s : kGpuCases) {
    for (bool causal : {true, false}) {
      for (DType t : {DType::BF16, DType::F16}) {
        INFO("B=" << s.B << " T=" << s.T << " H=" << s.H << " D=" << s.D << " causal=" << causal << " "
                  << dtype_name(t));
        Generator gen(14);
        const Tensor qkv = randn({s.B, s.T, 3 * s.H * s.D}, DType::F32, &gen).to(t),
                     gy = randn({s.B, s.T, s.H * s.D}, DType::F32, &gen).to(t);
        // f64 of the rounded inputs: what is left is the kernels' f32 arithmetic and the rounding
        // of y and dqkv to t
        const Result ref = rows_reference(qkv, gy, s.H, causal);
        const Result gpu = run(qkv.to(cuda), gy.to(cuda), s.H, causal, true);
        CHECK(gpu.y.dtype() == t);
        CHECK(gpu.dqkv.dtype() == t);
        const double ulp = t == DType::BF16 ? 1.0 / 128 : 1.0 / 1024;  // of 1.0
        CHECK(max_diff(gpu.y, ref.y) < 3 * ulp * std::max(1.0, max_abs(ref.y)));
        CHECK(max_diff(gpu.dqkv, ref.dqkv) < 3 * ulp * std::max(1.0, max_abs(ref.dqkv)));
        const Result l = fused_forward(qkv.to(cuda), s.H, causal);
        CHECK(l.y.dtype() == t);
        CHECK(l.lse.dtype() == DType::F32);
        CHECK(max_diff(l.lse, ref.lse) < 1e-5 * std::max(1.0, max_abs(ref.lse)));
      }
    }
  }
}

TEST_CASE("cuda: gradcheck through the flash kernels in f64", "[gpu][attention][gradcheck]") {
  TR_REQUIRE_GPU();
  AttentionPathGuard path(true);
  for (bool causal : {true, false}) {
    INFO("causal=" << causal);
    Generator gen(15);
    Tensor qkv = randn({2, 5, 3 * 2 * 4}, DType::F64, &gen).to(Device(DeviceType::CUDA, 0)).requires_grad_(true);
    auto f = [causal](const std::vector<Tensor>& x) {
      Tensor y = attention_qkvpacked(x[0], 2, causal);
      REQUIRE(y.grad_fn());
      CHECK_THAT(y.grad_fn()->name(), Contains("AttentionQkvpacked"));  // the fused op, not the chain
      return std::vector<Tensor>{y};
    };
    GradcheckResult r = gradcheck(f, {qkv});
    INFO(r.message);
    CHECK(r.ok);
  }
}

TEST_CASE("cuda: under autocast the flash kernels take the autocast dtype, without a cast to f32",
          "[gpu][attention][autocast]") {
  TR_REQUIRE_GPU();
  AttentionPathGuard path(true);
  const Device cuda(DeviceType::CUDA, 0);
  Generator gen(16);
  const Tensor q32 = randn({2, 20, 3 * 2 * 16}, DType::F32, &gen);
  const Result ref = rows_reference(q32.to(DType::BF16), zeros({2, 20, 32}), 2, true);
  for (DType in : {DType::BF16, DType::F32}) {
    INFO(dtype_name(in));
    Tensor qkv = q32.to(in).to(cuda).requires_grad_(true), y;
    {
      amp::AutocastGuard ac(DeviceType::CUDA, DType::BF16);
      y = attention_qkvpacked(qkv, 2, true);
    }
    CHECK(y.dtype() == DType::BF16);
    REQUIRE(y.grad_fn());
    CHECK_THAT(y.grad_fn()->name(), Contains("AttentionQkvpacked"));
    CHECK(max_diff(y, ref.y) < 3.0 / 128 * std::max(1.0, max_abs(ref.y)));
    y.sum().backward();
    CHECK(qkv.grad().dtype() == in);
  }
  // outside autocast bf16 runs as it is; the CPU kernel does not take it (the API runs the composite
  // chain there)
  Tensor yb = attention_qkvpacked(q32.to(DType::BF16).to(cuda), 2, true);
  CHECK(yb.dtype() == DType::BF16);
  CHECK(max_diff(yb, ref.y) < 3.0 / 128 * std::max(1.0, max_abs(ref.y)));
  CHECK_THROWS_WITH(dispatch("attention_qkvpacked", {q32.to(DType::BF16)},
                             {{"n_head", int64_t(2)}, {"causal", true}, {"scale", 0.25}}),
                    Contains("expected float32 or float64 on cpu, got bfloat16"));
}

TEST_CASE("cuda: a head dim past the kernels' takes the composite chain", "[gpu][attention]") {
  TR_REQUIRE_GPU();
  AttentionPathGuard path(true);
  Generator gen(17);
  Tensor qkv = randn({1, 3, 3 * 136}, DType::F64, &gen);
  Tensor y = attention_qkvpacked(qkv.to(Device(DeviceType::CUDA, 0)), 1, true);
  CHECK_THAT(y.grad_fn() ? y.grad_fn()->name() : std::string("none"), !Contains("AttentionQkvpacked"));
  CHECK(max_diff(y, attention_qkvpacked(qkv, 1, true)) < 1e-12);
}

TEST_CASE("attention_qkvpacked under bf16 autocast: the fused op in f32", "[attention][autocast]") {
  Generator gen(9);
  Tensor qkv = randn({2, 9, 24}, DType::F32, &gen);
  Tensor ref = attention_qkvpacked(qkv, 2, true);
  Tensor qb = qkv.to(DType::BF16);
  Tensor y;
  {
    amp::AutocastGuard ac(DeviceType::CPU, DType::BF16);
    y = attention_qkvpacked(qb, 2, true);
  }
  CHECK(y.dtype() == DType::F32);
  // the f32 attention of the bf16-rounded inputs
  CHECK(allclose(y, attention_qkvpacked(qb.to(DType::F32), 2, true), 1e-6, 1e-6));
  CHECK(allclose(y, ref, 5e-2, 5e-2));
}

}  // namespace test_attention_op
