// The fused attention over packed q, k, v (attention_qkvpacked and its backward): against the
// composite chain it replaces (fusion off), against the row formulas of ops/attention_math.h (what
// the CUDA kernels run), causal and not, on shapes with partial micro-kernel blocks; gradcheck and
// gradgradcheck (the second order runs the composite backward); thread-count independence and
// the argument checks.
#include <catch2/catch.hpp>
#include <omp.h>
#include <functional>
#include "op_cases.h"
#include "require_gpu.h"
#include "ops/attention_math.h"
#include "ops/autocast.h"
#include "ops/backends.h"
#include "ops/ops.h"
#include "ops/registry.h"

using namespace tr;
using namespace tr::test;
using Catch::Matchers::Contains;

namespace {

struct Result {
  Tensor y, dqkv;
};

// y = attention(qkv) and the gradient of sum(y gy) by qkv, with fusion on or off.
Result run(const Tensor& qkv0, const Tensor& gy, int64_t heads, bool causal, bool fused) {
  backends::fusion().enabled = fused;
  Tensor qkv = qkv0.detach().requires_grad_(true);
  Result r;
  try {
    r.y = attention_qkvpacked(qkv, heads, causal);
    r.y.backward(gy);
  } catch (...) {
    backends::fusion().enabled = true;
    throw;
  }
  backends::fusion().enabled = true;
  r.y = r.y.detach();
  r.dqkv = qkv.grad();
  return r;
}

// The row formulas of attention_math.h over the whole tensor (f64): y, lse and dqkv.
Result rows_reference(const Tensor& qkv, const Tensor& gy, int64_t heads, bool causal) {
  const attn::Geometry g =
      attn::Geometry::of(qkv.size(0), qkv.size(1), qkv.size(2), heads, 1.0 / std::sqrt(double(qkv.size(2) / 3 / heads)), causal);
  Tensor q = qkv.to(DType::F64).contiguous(), dy = gy.to(DType::F64).contiguous();
  Tensor y = zeros({g.B, g.T, g.C()}, DType::F64), lse = zeros({g.B, g.H, g.T}, DType::F64), dq = zeros_like(q);
  const double* pq = q.data_ptr<double>();
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t h = 0; h < g.H; ++h)
      for (int64_t i = 0; i < g.T; ++i) attn::forward_row<double, double>(g, pq, y.data_ptr<double>(), lse.data_ptr<double>(), b, h, i);
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t h = 0; h < g.H; ++h)
      for (int64_t i = 0; i < g.T; ++i) {
        attn::backward_q_row<double, double>(g, dy.data_ptr<double>(), pq, y.data_ptr<double>(), lse.data_ptr<double>(),
                                             dq.data_ptr<double>(), b, h, i);
        attn::backward_kv_row<double, double>(g, dy.data_ptr<double>(), pq, y.data_ptr<double>(),
                                              lse.data_ptr<double>(), dq.data_ptr<double>(), b, h, i);
      }
  return {y, dq};
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
  CHECK_THROWS_WITH(attention_qkvpacked(randn({2, 3, 12}), 3, true), Contains("n_head = 3 must be positive and divide C = 4"));
  CHECK_THROWS_WITH(attention_qkvpacked(randn({3, 12}), 2, true), Contains("got shape [3, 12]"));
  // dropout in training takes the composite chain; in eval the fused op
  Tensor qkv = randn({1, 4, 12});
  CHECK(allclose(attention_qkvpacked(qkv, 2, true, 0.5, false), attention_qkvpacked(qkv, 2, true), 1e-6, 1e-6));
}

TR_OP_CASE("attention_qkvpacked", "causal, 2 heads", ({randn64({2, 5, 12}, 280)}),
           [](const Inputs& x) { return Outputs{attention_qkvpacked(x[0], 2, true)}; });
TR_OP_CASE("attention_qkvpacked", "not causal, 1 head", ({randn64({1, 6, 9}, 281)}),
           [](const Inputs& x) { return Outputs{attention_qkvpacked(x[0], 1, false)}; });

TEST_CASE("cuda: attention_qkvpacked and its backward match the CPU kernel", "[gpu][attention]") {
  TR_REQUIRE_GPU();
  for (bool causal : {true, false}) {
    for (DType t : {DType::F32, DType::F64}) {
      INFO("causal=" << causal << " " << dtype_name(t));
      Generator gen(8);
      Tensor qkv = randn({2, 37, 3 * 2 * 16}, t, &gen), gy = randn({2, 37, 2 * 16}, t, &gen);
      Result cpu = run(qkv, gy, 2, causal, true);
      Result gpu = run(qkv.to(Device("cuda")), gy.to(Device("cuda")), 2, causal, true);
      const double tol = t == DType::F64 ? 1e-11 : 2e-5;
      CHECK(gpu.y.device().is_cuda());
      CHECK(allclose(gpu.y.to(Device("cpu")), cpu.y, tol, tol));
      CHECK(allclose(gpu.dqkv.to(Device("cpu")), cpu.dqkv, tol, tol));
    }
  }
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
