// CUDA backend tests. [gpu]: every CUDA kernel against the CPU kernel on the same inputs (random,
// awkward shapes, broadcasting, non-contiguous views, special values), the pointwise ops taken from
// their tables (ops/*_ops.def); without a GPU each prints a skip message. [allocator], [registry]
// and the rest run everywhere: the caching allocator on the CPU, the error of Device("cuda")
// without a GPU, the registry walk that wants a CUDA kernel for every op but a listed few.
#include <catch2/catch.hpp>
#include "unit/require_gpu.h"
#include <sys/wait.h>
#include <unistd.h>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>
#include "core/grad_mode.h"
#include "core/allocator.h"
#include "core/cuda_hooks.h"
#include "ops/backends.h"
#include "ops/cuda_info.h"
#include "ops/fused_optim.h"
#include "ops/init.h"
#include "ops/op_tables.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace test_cuda {

using namespace tr;

namespace {

using Inputs = std::vector<Tensor>;
using Fn = std::function<Tensor(const Inputs&)>;

Device gpu() { return Device(DeviceType::CUDA, 0); }

constexpr DType kFloatTypes[] = {DType::F32, DType::F64, DType::F16, DType::BF16};
constexpr DType kIntTypes[] = {DType::I64, DType::I32, DType::U8};
constexpr DType kAllTypes[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                               DType::I64, DType::I32, DType::U8,  DType::Bool};

struct Tol {
  double rtol, atol;
};
// rtol 1e-5 for f32 and 1e-12 for f64; one or two units of the last place for f16 / bf16.
Tol tol_for(DType t) {
  switch (t) {
    case DType::F32: return {1e-5, 1e-6};
    case DType::F64: return {1e-12, 1e-14};
    case DType::F16: return {2e-3, 1e-3};
    case DType::BF16: return {1.6e-2, 1e-2};
    default: return {0, 0};
  }
}
Tol scaled(Tol t, double f) { return {t.rtol * f, t.atol * f}; }

// Uniform in [lo, hi) drawn on the CPU in f64, then cast to t (integers truncate).
Tensor data(const Shape& s, DType t, uint64_t seed, double lo = -2.0, double hi = 2.0) {
  Generator g(seed);
  Tensor u = rand(s, DType::F64, &g) * (hi - lo) + lo;
  return cast(u, t);
}
// Values with many ties: multiples of 0.5 in [lo, hi).
Tensor ties(const Shape& s, DType t, uint64_t seed, double lo = -3.0, double hi = 3.0) {
  Generator g(seed);
  Tensor u = rand(s, DType::F64, &g) * (hi - lo) + lo;
  Tensor r = cast(cast(u * 2.0, DType::I64), DType::F64) * 0.5;
  return cast(r, t);
}
// nan, +-inf, +-0, and ordinary values, as a [2, 5] tensor of dtype t.
Tensor specials(DType t) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  return cast(from_vector({nan, inf, -inf, 0.0, -0.0, 1.5, -2.25, 0.3, nan, 7.0}, {2, 5}, DType::F64), t);
}

// gpu (moved to the CPU) against cpu: same dtype and shape, |g - c| <= atol + rtol |c|,
// NaN exactly where NaN, infinities equal.
void check_close(const std::string& what, const Tensor& cpu, const Tensor& gpu_result, Tol tol) {
  INFO(what);
  REQUIRE(gpu_result.device().is_cuda());
  Tensor g = gpu_result.to(kCPU);
  CHECK(dtype_name(g.dtype()) == std::string(dtype_name(cpu.dtype())));
  REQUIRE(g.sizes() == cpu.sizes());
  auto a = cpu.tolist(), b = g.tolist();
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    bool ok;
    if (std::isnan(a[i]) || std::isnan(b[i]))
      ok = std::isnan(a[i]) && std::isnan(b[i]);
    else if (std::isinf(a[i]) || std::isinf(b[i]))
      ok = a[i] == b[i];
    else
      ok = std::abs(a[i] - b[i]) <= tol.atol + tol.rtol * std::abs(a[i]);
    if (!ok && bad++ == 0) first = i;
  }
  INFO(bad << " of " << a.size() << " elements differ; first at flat index " << first << ": cpu "
           << (a.empty() ? 0.0 : a[first]) << " vs gpu " << (b.empty() ? 0.0 : b[first]) << " (shape "
           << shape_str(cpu.sizes()) << ", " << dtype_name(cpu.dtype()) << ")");
  CHECK(bad == 0);
}

// Bit-for-bit equality (after conversion to f64, which is exact for every dtype).
void check_equal(const std::string& what, const Tensor& cpu, const Tensor& gpu_result) {
  check_close(what, cpu, gpu_result, {0, 0});
}

Inputs to_gpu(const Inputs& in) {
  Inputs r;
  for (auto& t : in) r.push_back(t.to(gpu()));
  return r;
}

// fn on the CPU inputs and on copies of them on cuda:0 (fn makes its own views, so the GPU sees
// the same strides); compared with the tolerance of the result's dtype times `slack`.
void compare(const std::string& what, const Fn& fn, const Inputs& in, double slack = 1.0) {
  Tensor c = fn(in);
  Tensor g = fn(to_gpu(in));
  check_close(what, c, g, scaled(tol_for(c.dtype()), slack));
}

// ---- the table ops (ops/*_ops.def), as the [gpu] cases call them

// One call of a table op: its registry name, attrs (one variant for ops that have attributes)
// and a label for messages.
struct TableCall {
  std::string op, label;
  Attrs attrs;
  DtypeSet dtypes = DtypeSet::NUMERIC;
  Tensor operator()(const Inputs& in) const { return dispatch1(op.c_str(), in, attrs); }
};

// The attribute variants the [gpu] cases run each table op with attributes under; an op not
// listed runs once without attrs (the [registry] case below runs every call on the CPU, so an
// op whose attrs are missing here fails there, GPU or not).
const std::map<std::string, std::vector<std::pair<std::string, Attrs>>>& attr_variants() {
  static const std::map<std::string, std::vector<std::pair<std::string, Attrs>>> v = {
      {"clamp",
       {{"(-0.5, 0.7)", {{"min", -0.5}, {"max", 0.7}, {"has_min", true}, {"has_max", true}}},
        {"(max 1)", {{"min", 0.0}, {"max", 1.0}, {"has_min", false}, {"has_max", true}}},
        {"(min 0.2)", {{"min", 0.2}, {"max", 0.0}, {"has_min", true}, {"has_max", false}}}}},
      {"gelu", {{"", {{"approximate", std::string("none")}}}, {"(tanh)", {{"approximate", std::string("tanh")}}}}},
      {"softplus",
       {{"", {{"beta", 1.0}, {"threshold", 20.0}}}, {"(beta 2, threshold 1.5)", {{"beta", 2.0}, {"threshold", 1.5}}}}},
      {"add", {{"", {{"alpha", 1.0}}}, {"(alpha 2.5)", {{"alpha", 2.5}}}}},
      {"sub", {{"(alpha -0.5)", {{"alpha", -0.5}}}}},
  };
  return v;
}

std::vector<TableCall> table_calls(const std::vector<std::pair<std::string, DtypeSet>>& table) {
  std::vector<TableCall> r;
  for (auto& [op, dtypes] : table) {
    auto it = attr_variants().find(op);
    if (it == attr_variants().end()) {
      r.push_back({op, op, {}, dtypes});
      continue;
    }
    for (auto& [label, attrs] : it->second) r.push_back({op, label.empty() ? op : op + label, attrs, dtypes});
  }
  return r;
}
const std::vector<TableCall>& unary_calls() {
  static const std::vector<TableCall> c = table_calls({
#define TR_UNARY_OP(NAME, OP, DTYPES, ...) {#NAME, DtypeSet::DTYPES},
#include "ops/unary_ops.def"
  });
  return c;
}
const std::vector<TableCall>& binary_calls() {
  static const std::vector<TableCall> c = table_calls({
#define TR_BINARY_OP(NAME, OP, DTYPES, ...) {#NAME, DtypeSet::DTYPES},
#include "ops/binary_ops.def"
  });
  return c;
}
const std::vector<TableCall>& compare_calls() {
  static const std::vector<TableCall> c = table_calls({
#define TR_COMPARE_OP(NAME, ...) {#NAME, DtypeSet::NUMERIC},
#include "ops/compare_ops.def"
  });
  return c;
}
const std::vector<TableCall>& predicate_calls() {
  static const std::vector<TableCall> c = table_calls({
#define TR_PREDICATE_OP(NAME, ...) {#NAME, DtypeSet::NUMERIC},
#include "ops/predicate_ops.def"
  });
  return c;
}

// The binary cases' inputs mapped into an op's domain: pow's base positive.
Tensor binary_lhs(const std::string& op, const Tensor& a) { return op == "pow" ? abs(a) + 0.5 : a; }
// Binary table ops the integer cases skip: div is true division (its API computes integers in
// f32, tested with the floats), pow overflows at these values (tested below with small ones).
bool integer_case_skips(const std::string& op) { return op == "div" || op == "pow"; }

}  // namespace

// ---------------------------------------------------------------- pointwise

TEST_CASE("cuda: unary ops match the CPU on contiguous, transposed and strided inputs", "[gpu]") {
  TR_REQUIRE_GPU();
  for (DType t : kFloatTypes) {
    Tensor x = data({7, 33}, t, 1, -3.0, 3.0);
    Tensor pos = data({7, 33}, t, 2, 0.01, 4.0);  // log / sqrt / rsqrt away from NaN
    Tensor sp = specials(t);
    for (auto& op : unary_calls()) {
      std::string w = op.label + " " + dtype_name(t);
      // transcendental functions of CUDA and glibc differ by an ulp or two
      double slack = (t == DType::F32 || t == DType::F64) ? 4.0 : 1.0;
      compare(
          w + " contiguous", [&](const Inputs& in) { return op({in[0]}); }, {x}, slack);
      compare(
          w + " transposed", [&](const Inputs& in) { return op({in[0].t()}); }, {x}, slack);
      compare(
          w + " strided", [&](const Inputs& in) { return op({in[0].slice(1, 1, 33, 3)}); }, {x}, slack);
      compare(
          w + " positive", [&](const Inputs& in) { return op({in[0]}); }, {pos}, slack);
      compare(
          w + " specials", [&](const Inputs& in) { return op({in[0]}); }, {sp}, slack);
      compare(
          w + " 0-dim", [&](const Inputs& in) { return op({in[0]}); }, {data({}, t, 3)}, slack);
    }
  }
  for (DType t : kIntTypes) {
    Tensor x = t == DType::U8 ? data({5, 9}, t, 4, 0.0, 200.0) : data({5, 9}, t, 4, -50.0, 50.0);
    for (auto& op : unary_calls()) {
      if (op.dtypes == DtypeSet::FLOAT) continue;  // integers are promoted to f32 first: the float cases
      compare(op.label + " " + dtype_name(t), [&](const Inputs& in) { return op({in[0].t()}); }, {x});
    }
  }
}

TEST_CASE("cuda: binary ops match the CPU with broadcasting, views and scalars", "[gpu]") {
  TR_REQUIRE_GPU();
  for (DType t : kFloatTypes) {
    Tensor a = data({3, 1, 5}, t, 5), b = data({4, 1}, t, 6, 0.5, 2.0);
    Tensor c = data({5, 4, 3}, t, 7);  // permuted to [3, 4, 5]
    for (auto& op : binary_calls()) {
      auto f = [&](const Tensor& x, const Tensor& y) { return op({binary_lhs(op.op, x), y}); };
      std::string w = op.label + " " + dtype_name(t);
      double slack = (t == DType::F32 || t == DType::F64) ? 4.0 : 1.0;
      compare(
          w + " broadcast", [&](const Inputs& in) { return f(in[0], in[1]); }, {a, b}, slack);
      compare(
          w + " permuted",
          [&](const Inputs& in) {
            return f(in[0].permute({2, 1, 0}), in[1]);
          },
          {c, a}, slack);
      compare(
          w + " specials", [&](const Inputs& in) { return f(in[0], in[1].t()); },
          {specials(t), specials(t).t().contiguous()}, slack);
      // a 0-dim CPU tensor (not a wrapped number) next to a CUDA tensor
      Tensor s = scalar_tensor(1.75, t);
      compare(
          w + " cpu 0-dim", [&](const Inputs& in) { return f(in[0], s); }, {a}, slack);
      compare(
          w + " cpu 0-dim first", [&](const Inputs& in) { return f(s, in[0]); }, {a}, slack);
    }
    // wrapped numbers (torch's python scalars), including pow's special exponents
    compare(std::string("x + 2.5 ") + dtype_name(t), [](const Inputs& in) { return in[0] + 2.5; }, {a});
    compare(std::string("2.5 - x ") + dtype_name(t), [](const Inputs& in) { return 2.5 - in[0]; }, {a});
    compare(std::string("x * 0.3 ") + dtype_name(t), [](const Inputs& in) { return in[0] * 0.3; }, {a});
    compare(std::string("1 / x ") + dtype_name(t), [](const Inputs& in) { return 1.0 / in[0]; }, {a});
    for (double e : {0.5, -0.5, 2.0, 3.0, 1.7, -1.0}) {
      compare(
          std::string("pow(x, ") + std::to_string(e) + ") " + dtype_name(t),
          [e](const Inputs& in) { return pow(in[0], e); }, {a}, 4.0);
    }
    compare(
        std::string("pow(2, x) ") + dtype_name(t), [](const Inputs& in) { return pow(2.0, in[0]); }, {a}, 4.0);
  }
  for (DType t : kIntTypes) {
    Tensor a = data({3, 1, 5}, t, 8, 0.0, 20.0), b = data({4, 1}, t, 9, 1.0, 6.0);
    for (auto& op : binary_calls()) {
      if (op.dtypes == DtypeSet::FLOAT || integer_case_skips(op.op)) continue;
      compare(op.label + " " + dtype_name(t), [&](const Inputs& in) { return op({in[0], in[1]}); }, {a, b});
    }
    compare(std::string("pow ") + dtype_name(t), [](const Inputs& in) { return pow(in[0], in[1]); },
            {data({6}, t, 10, 0.0, 4.0), data({6}, t, 11, 0.0, 4.0)});
  }
}

TEST_CASE("cuda: in-place arithmetic writes through strided views", "[gpu]") {
  TR_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::F64, DType::I64}) {
    Tensor base = data({6, 8}, t, 12, -5.0, 5.0), other = data({8}, t, 13, 1.0, 3.0);
    Fn f = [](const Inputs& in) {
      Tensor b = in[0].clone();
      Tensor v = b.t().slice(0, 1, 8, 2);  // [4, 6] view with strides (2, 8)
      v.add_(in[1].slice(0, 1, 8, 2).unsqueeze(1), 2.0);
      v.mul_(in[1].slice(0, 0, 4).unsqueeze(1));
      v.sub_(in[1][0]);  // a 0-dim CUDA tensor
      b.add_(3.0);
      return b;
    };
    compare(std::string("in-place ") + dtype_name(t), f, {base, other});
  }
}

TEST_CASE("cuda: comparisons, logical ops, predicates and where match the CPU", "[gpu]") {
  TR_REQUIRE_GPU();
  for (DType t : kAllTypes) {
    std::string d = dtype_name(t);
    Tensor a = t == DType::Bool ? data({4, 1, 6}, DType::F64, 14) > 0.0 : ties({4, 1, 6}, t, 14, 0.0, 3.0);
    Tensor b = t == DType::Bool ? data({5, 1}, DType::F64, 15) > 0.0 : ties({5, 1}, t, 15, 0.0, 3.0);
    for (auto& op : compare_calls()) {
      compare(op.label + " " + d, [&](const Inputs& in) { return op({in[0], in[1]}); }, {a, b});
      compare(op.label + " transposed " + d,
              [&](const Inputs& in) {
                return op({in[0].transpose(0, 2), in[1]});
              },
              {a, b});
    }
    for (auto& op : predicate_calls()) {
      compare(op.label + " " + d, [&](const Inputs& in) { return op({in[0]}); }, {a});
      compare(op.label + " transposed " + d, [&](const Inputs& in) { return op({in[0].transpose(0, 2)}); }, {a});
    }
    compare("logical_and " + d, [](const Inputs& in) { return logical_and(in[0], in[1]); }, {a, b});
    compare("where " + d, [](const Inputs& in) { return where(in[0] > in[1], in[0], in[1]); }, {a, b});
  }
  for (DType t : kFloatTypes) {
    std::string d = dtype_name(t);
    Tensor s = specials(t);
    for (auto& op : predicate_calls())
      compare(op.label + " specials " + d, [&](const Inputs& in) { return op({in[0]}); }, {s});
    for (auto& op : compare_calls()) {
      compare(op.label + " specials " + d, [&](const Inputs& in) { return op({in[0], in[0]}); }, {s});
      compare(op.label + " specials permuted " + d,
              [&](const Inputs& in) {
                return op({in[0], in[0].t().reshape({2, 5})});
              },
              {s});
    }
    compare("maximum specials " + d, [](const Inputs& in) { return maximum(in[0], in[0].t().reshape({2, 5})); }, {s});
  }
  // where with a broadcast condition and a scalar branch
  compare("where scalar", [](const Inputs& in) { return where(in[1] > 0.0, in[0], wrap_scalar(0.25, DType::F64)); },
          {data({3, 4}, DType::F32, 16), data({4}, DType::F32, 17)});
}

TEST_CASE("cuda: cast between every pair of dtypes matches the CPU bit for bit", "[gpu]") {
  TR_REQUIRE_GPU();
  // non-negative values (a negative float to u8 is undefined behaviour in C++), exact halves,
  // values that round differently in f16 / bf16, overflow of f16, subnormals
  Tensor v = from_vector(
      {0.0, 1.0, 2.5, 3.75, 0.1, 1e-3, 1e-6, 1e-8, 65519.0, 70000.0, 255.0, 123.456, 0.5, 7.0, 3.0e-5, 1.0 / 3.0},
      {4, 4}, DType::F64);
  Tensor neg_v = -v;
  for (DType src : kAllTypes) {
    for (DType dst : kAllTypes) {
      std::string w = std::string("cast ") + dtype_name(src) + " -> " + dtype_name(dst);
      // float -> integer truncates and f16 overflows to inf on both; values past the range of
      // an integer type are undefined behaviour in C++, so integers see [0, 250] only
      const bool ints = is_integral(src) || is_integral(dst) || dst == DType::Bool;
      Tensor x = src == DType::Bool ? v > 1.0 : cast(ints ? clamp(v, 0.0, 250.0) : v, src);
      compare(w, [dst](const Inputs& in) { return cast(in[0].t(), dst); }, {x});
      if (src != DType::U8 && src != DType::Bool && dst != DType::U8 && dst != DType::Bool) {
        Tensor xn = cast(ints ? clamp(neg_v, -250.0, 0.0) : neg_v, src);
        compare(w + " negative", [dst](const Inputs& in) { return cast(in[0], dst); }, {xn});
      }
    }
  }
}

TEST_CASE("cuda: copy_ converts dtypes, broadcasts and writes strided destinations", "[gpu]") {
  TR_REQUIRE_GPU();
  for (DType dt : kAllTypes) {
    for (DType st : {DType::F64, DType::F32, DType::I64, DType::Bool}) {
      std::string w = std::string("copy_ ") + dtype_name(st) + " -> " + dtype_name(dt);
      Tensor src = st == DType::Bool ? data({6, 1}, DType::F64, 20) > 0.0 : data({6, 1}, st, 20, 0.0, 9.0);
      Fn f = [dt](const Inputs& in) {
        Tensor d = zeros({5, 6}, TensorOptions(dt).device(in[0].device()));
        d.t().copy_(in[0]);  // [6, 5] view with strides (1, 6), src [6, 1] broadcast
        return d;
      };
      compare(w, f, {src});
      Fn g = [dt](const Inputs& in) {
        Tensor d = full({4, 10}, 1.0, TensorOptions(dt).device(in[0].device()));
        d.slice(1, 1, 10, 3).copy_(in[0].t().slice(1, 0, 3));  // strided dst from a strided src
        return d;
      };
      compare(w + " strided", g, {data({3, 4}, st == DType::Bool ? DType::F32 : st, 21, 0.0, 9.0)});
    }
  }
  // across devices, both ways
  Tensor h = data({3, 7}, DType::F32, 22);
  Tensor d = zeros({7, 3}, TensorOptions(DType::F64).device(gpu()));
  d.copy_(h.t());
  check_close("copy_ cpu -> cuda", cast(h.t(), DType::F64), d, tol_for(DType::F64));
  Tensor back = zeros({7, 3}, DType::F64);
  back.copy_(d);
  CHECK(equal(back, d.to(kCPU)));
}

TEST_CASE("cuda: fill_ of every dtype, contiguous and strided", "[gpu]") {
  TR_REQUIRE_GPU();
  for (DType t : kAllTypes) {
    for (double v : {0.0, -0.0, 3.75, 1e-9, 300.0}) {
      std::string w = std::string("fill_ ") + dtype_name(t) + " " + std::to_string(v);
      Fn f = [t, v](const Inputs& in) {
        Tensor x = full({5, 7}, 2.0, TensorOptions(t).device(in[0].device()));
        x.slice(1, 0, 7, 2).fill_(v);
        x.select(0, 3).fill_(v);
        return x;
      };
      compare(w, f, {zeros({1})});
      Fn g = [t, v](const Inputs& in) { return full({33}, v, TensorOptions(t).device(in[0].device())); };
      compare(w + " contiguous", g, {zeros({1})});
    }
  }
}

TEST_CASE("cuda: elementwise ops on more dims than one launch holds", "[gpu]") {
  TR_REQUIRE_GPU();
  // 10 dims that no merging can reduce: the leading dims are looped on the host
  Shape s{2, 3, 2, 3, 2, 3, 2, 3, 2, 2};
  Shape rev{9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
  Tensor a = data(s, DType::F32, 23), b = data({2, 1, 2, 1, 2, 1, 2, 1, 2, 1}, DType::F32, 24);
  compare("contiguous() of a reversed 10-d permutation",
          [&](const Inputs& in) { return in[0].permute(rev).contiguous(); }, {a});
  compare("add on 10 broadcast dims", [&](const Inputs& in) { return in[0].permute(rev) + in[1].permute(rev); },
          {a, b});
  compare("sum over 5 of 10 dims", [&](const Inputs& in) { return sum(in[0].permute(rev), {0, 2, 4, 6, 8}); }, {a});
  compare("sum keeping 9 of 10 dims", [&](const Inputs& in) { return sum(in[0].permute(rev), {4}); }, {a});
  compare("argmax keeping 9 of 10 dims", [&](const Inputs& in) { return argmax(in[0].permute(rev), 2); }, {a});
  compare("softmax over a 10-d permutation", [&](const Inputs& in) { return softmax(in[0].permute(rev), 3); }, {a});
}

// ---------------------------------------------------------------- reductions

TEST_CASE("cuda: sum over every kind of dim set matches the CPU", "[gpu]") {
  TR_REQUIRE_GPU();
  const std::vector<std::pair<Shape, bool>> cases = {{{}, false},    {{0}, false},  {{1}, true},    {{2}, false},
                                                     {{0, 2}, true}, {{-1}, false}, {{0, 1}, false}};
  for (DType t : kAllTypes) {
    Tensor x = t == DType::Bool ? data({4, 5, 6}, DType::F64, 30) > 0.0 : data({4, 5, 6}, t, 30, -3.0, 9.0);
    // floats: sums of f16 / bf16 round once at the end, as on the CPU
    for (const auto& c : cases) {
      const Shape& dims = c.first;
      const bool keep = c.second;
      std::string w = std::string("sum ") + dtype_name(t) + " dims " + shape_str(dims) + (keep ? " keepdim" : "");
      compare(w, [&](const Inputs& in) { return sum(in[0], dims, keep); }, {x});
      compare(w + " transposed", [&](const Inputs& in) { return sum(in[0].transpose(0, 2), dims, keep); }, {x});
    }
  }
  // long rows and columns: split across blocks, then combined
  compare(
      "sum 300000 f32", [](const Inputs& in) { return sum(in[0]); }, {data({300000}, DType::F32, 31)}, 10.0);
  compare(
      "sum 300000 f64", [](const Inputs& in) { return sum(in[0]); }, {data({300000}, DType::F64, 31)}, 10.0);
  compare("sum 300000 i64", [](const Inputs& in) { return sum(in[0]); }, {data({300000}, DType::I64, 31, -1e6, 1e6)});
  compare("sum columns [20000, 3]", [](const Inputs& in) { return sum(in[0], {0}); },
          {data({20000, 3}, DType::F64, 32)});
  compare("sum rows [3, 20000]", [](const Inputs& in) { return sum(in[0], {1}); }, {data({3, 20000}, DType::F64, 33)});
  compare(
      "sum [257, 1031] dim 0", [](const Inputs& in) { return sum(in[0], {0}); }, {data({257, 1031}, DType::F32, 34)},
      4.0);
  compare("sum of empty dim", [](const Inputs& in) { return sum(in[0], {1}); }, {zeros({3, 0})});
  compare("mean", [](const Inputs& in) { return mean(in[0], {1}, true); }, {data({6, 7, 8}, DType::F32, 35)});
}

TEST_CASE("cuda: amax, amin, max/min along a dim and argmax/argmin match the CPU", "[gpu]") {
  TR_REQUIRE_GPU();
  for (DType t : kAllTypes) {
    std::string d = dtype_name(t);
    // many ties: the first index attaining the extremum must win on both devices
    Tensor x = t == DType::Bool ? data({6, 7, 5}, DType::F64, 40) > 0.0 : ties({6, 7, 5}, t, 40, 0.0, 4.0);
    for (Shape dims : {Shape{}, Shape{0}, Shape{1, 2}, Shape{2}}) {
      compare("amax " + d + " " + shape_str(dims), [&](const Inputs& in) { return amax(in[0], dims); }, {x});
      compare("amin " + d + " " + shape_str(dims),
              [&](const Inputs& in) { return amin(in[0].transpose(0, 1), dims, true); }, {x});
    }
    for (int64_t dim : {0, 1, 2, -1}) {
      std::string w = " " + d + " dim " + std::to_string(dim);
      compare("max values" + w, [&](const Inputs& in) { return max(in[0], dim).values; }, {x});
      compare("max indices" + w, [&](const Inputs& in) { return max(in[0], dim).indices; }, {x});
      compare("min values" + w, [&](const Inputs& in) { return min(in[0].permute({2, 0, 1}), dim, true).values; }, {x});
      compare("min indices" + w,
              [&](const Inputs& in) {
                return min(in[0].permute({2, 0, 1}), dim, true).indices;
              },
              {x});
      compare("argmax" + w, [&](const Inputs& in) { return argmax(in[0], dim); }, {x});
      compare("argmin" + w, [&](const Inputs& in) { return argmin(in[0], dim, true); }, {x});
    }
    compare("argmax flat " + d, [](const Inputs& in) { return argmax(in[0]); }, {x});
    compare("argmin flat " + d, [](const Inputs& in) { return argmin(in[0].t()); }, {x.reshape({6, 35})});
  }
  for (DType t : kFloatTypes) {
    // NaN wins, and the first NaN's index is reported
    Tensor s = specials(t);
    compare(std::string("amax specials ") + dtype_name(t), [](const Inputs& in) { return amax(in[0], {1}); }, {s});
    compare(std::string("argmin specials ") + dtype_name(t), [](const Inputs& in) { return argmin(in[0], 1); }, {s});
    compare(std::string("max indices specials ") + dtype_name(t),
            [](const Inputs& in) { return max(in[0], 0).indices; }, {s});
    compare(std::string("amin of all, NaN ") + dtype_name(t), [](const Inputs& in) { return amin(in[0]); }, {s});
  }
  // long reductions: split across blocks
  Tensor big = ties({200000}, DType::F32, 41, -100.0, 100.0);
  compare("argmax 200000", [](const Inputs& in) { return argmax(in[0]); }, {big});
  compare("amin 200000", [](const Inputs& in) { return amin(in[0]); }, {big});
  compare("max indices [30000, 3] dim 0", [](const Inputs& in) { return max(in[0], 0).indices; },
          {ties({30000, 3}, DType::F64, 42, -50.0, 50.0)});
}

TEST_CASE("cuda: var matches the CPU", "[gpu]") {
  TR_REQUIRE_GPU();
  for (DType t : kFloatTypes) {
    Tensor x = data({5, 6, 7}, t, 50, 1.0, 3.0);
    for (double corr : {0.0, 1.0}) {
      for (Shape dims : {Shape{}, Shape{0}, Shape{1, 2}, Shape{-1}}) {
        std::string w =
            std::string("var ") + dtype_name(t) + " " + shape_str(dims) + " correction " + std::to_string(corr);
        compare(
            w, [&](const Inputs& in) { return var(in[0], dims, corr); }, {x}, 4.0);
        compare(
            w + " permuted",
            [&](const Inputs& in) {
              return var(in[0].permute({2, 0, 1}), dims, corr, true);
            },
            {x}, 4.0);
      }
    }
  }
  compare(
      "var 100000", [](const Inputs& in) { return var(in[0]); }, {data({100000}, DType::F64, 51)}, 10.0);
  compare("std", [](const Inputs& in) { return tr::std(in[0], {1}); }, {data({4, 9}, DType::F32, 52)});
  compare("var of one element (0 / 0)", [](const Inputs& in) { return var(in[0], {1}); },
          {data({3, 1}, DType::F32, 53)});
  compare("norm p=2", [](const Inputs& in) { return norm(in[0], 2.0, {1}); }, {data({4, 9}, DType::F32, 54)});
  compare("norm p=inf", [](const Inputs& in) { return norm(in[0], INFINITY); }, {data({4, 9}, DType::F32, 54)});
}

// ---------------------------------------------------------------- softmax

TEST_CASE("cuda: softmax and log_softmax match the CPU", "[gpu]") {
  TR_REQUIRE_GPU();
  for (DType t : kFloatTypes) {
    std::string d = dtype_name(t);
    Tensor x = data({5, 7, 9}, t, 60, -4.0, 4.0);
    for (int64_t dim : {0, 1, 2, -1}) {
      std::string w = " " + d + " dim " + std::to_string(dim);
      compare(
          "softmax" + w, [&](const Inputs& in) { return softmax(in[0], dim); }, {x}, 4.0);
      compare(
          "log_softmax" + w, [&](const Inputs& in) { return log_softmax(in[0], dim); }, {x}, 4.0);
      compare(
          "softmax permuted" + w,
          [&](const Inputs& in) {
            return softmax(in[0].permute({2, 0, 1}), dim);
          },
          {x}, 4.0);
      compare(
          "log_softmax strided" + w, [&](const Inputs& in) { return log_softmax(in[0].slice(2, 0, 9, 2), dim); }, {x},
          4.0);
    }
    // rows longer than a warp's share: a block per row
    Tensor wide = data({3, 2, 5000}, t, 61, -10.0, 10.0);
    compare(
        "softmax long rows " + d, [](const Inputs& in) { return softmax(in[0], -1); }, {wide}, 4.0);
    compare(
        "log_softmax long rows " + d, [](const Inputs& in) { return log_softmax(in[0], -1); }, {wide}, 4.0);
    compare(
        "softmax long strided rows " + d, [](const Inputs& in) { return softmax(in[0].transpose(1, 2), 1); }, {wide},
        4.0);
    compare("softmax 0-dim " + d, [](const Inputs& in) { return softmax(in[0], 0); }, {data({}, t, 62)});
    // -inf entries (masked logits) and a row holding a NaN
    Tensor m = data({4, 6}, DType::F64, 63);
    std::vector<double> mv = m.tolist();
    mv[1] = -INFINITY;
    mv[8] = -INFINITY;
    mv[20] = NAN;
    Tensor masked = cast(from_vector(mv, {4, 6}, DType::F64), t);
    compare(
        "softmax masked " + d, [](const Inputs& in) { return softmax(in[0], 1); }, {masked}, 4.0);
    compare(
        "log_softmax masked " + d, [](const Inputs& in) { return log_softmax(in[0], 1); }, {masked}, 4.0);
  }
}

// ---------------------------------------------------------------- matrix products

TEST_CASE("cuda: mm and bmm through cuBLAS match the CPU", "[gpu]") {
  TR_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32}) {
    std::string d = dtype_name(t);
    const bool fl = is_floating(t);
    // f32: K = 37 products of magnitude ~1 sum in a different order than OpenBLAS
    const double slack = t == DType::F32 ? 50.0 : (t == DType::F64 ? 100.0 : 2.0);
    auto mk = [&](const Shape& s, uint64_t seed) { return fl ? data(s, t, seed) : data(s, t, seed, -5.0, 5.0); };
    Tensor a = mk({7, 37}, 70), b = mk({37, 5}, 71), wide = mk({9, 50}, 72);
    compare(
        "mm " + d, [](const Inputs& in) { return mm(in[0], in[1]); }, {a, b}, slack);
    compare(
        "mm a^T b " + d, [](const Inputs& in) { return mm(in[0].t(), in[1]); }, {mk({37, 7}, 73), b}, slack);
    compare(
        "mm a b^T " + d, [](const Inputs& in) { return mm(in[0], in[1].t()); }, {a, mk({5, 37}, 74)}, slack);
    compare(
        "mm row-strided " + d, [](const Inputs& in) { return mm(in[0].slice(1, 3, 40), in[1]); }, {mk({7, 45}, 75), b},
        slack);
    compare(
        "mm both strided " + d,
        [](const Inputs& in) { return mm(in[0].slice(1, 0, 50, 2), in[1].slice(0, 0, 25).t().t()); },
        {wide, mk({37, 5}, 76)}, slack);
    compare(
        "mm element-strided (copy) " + d,
        [](const Inputs& in) { return mm(in[0].slice(0, 0, 9, 2).slice(1, 0, 50, 2), in[1].slice(0, 0, 25)); },
        {wide, mk({37, 6}, 77)}, slack);
    compare("mm K = 0 " + d, [](const Inputs& in) { return mm(in[0], in[1]); }, {mk({3, 0}, 78), mk({0, 4}, 79)});
    compare("mm M = 0 " + d, [](const Inputs& in) { return mm(in[0], in[1]); }, {mk({0, 3}, 80), mk({3, 4}, 81)});
    compare(
        "matmul vector-vector " + d, [](const Inputs& in) { return matmul(in[0], in[1]); },
        {mk({37}, 82), mk({37}, 83)}, slack);
    compare(
        "matmul matrix-vector " + d, [](const Inputs& in) { return matmul(in[0], in[1]); }, {a, mk({37}, 84)}, slack);
    Tensor ba = mk({4, 6, 19}, 85), bb = mk({4, 19, 3}, 86);
    compare(
        "bmm " + d, [](const Inputs& in) { return bmm(in[0], in[1]); }, {ba, bb}, slack);
    compare(
        "bmm transposed " + d, [](const Inputs& in) { return bmm(in[0].transpose(1, 2), in[1].transpose(1, 2)); },
        {mk({4, 19, 6}, 87), mk({4, 3, 19}, 88)}, slack);
    compare(
        "bmm batch-permuted " + d,
        [](const Inputs& in) {
          return bmm(in[0].permute({1, 0, 2}), in[1]);
        },
        {mk({6, 4, 19}, 89), bb}, slack);
    compare(
        "matmul broadcast batch " + d, [](const Inputs& in) { return matmul(in[0], in[1]); },
        {mk({1, 6, 19}, 90), mk({2, 4, 19, 3}, 91)}, slack);
    compare(
        "bmm batch 1 " + d, [](const Inputs& in) { return bmm(in[0], in[1]); },
        {mk({1, 6, 19}, 92), mk({1, 19, 3}, 93)}, slack);
  }
  // a larger f32 product (tensor-core shapes) stays within the f32 tolerance scaled by sqrt(K)
  compare(
      "mm 256 x 512 x 128 f32", [](const Inputs& in) { return mm(in[0], in[1]); },
      {data({256, 512}, DType::F32, 94), data({512, 128}, DType::F32, 95)}, 300.0);
}

// ---------------------------------------------------------------- convolution and pooling

TEST_CASE("cuda: conv2d and its two backward ops through cuDNN match the CPU", "[gpu]") {
  TR_REQUIRE_GPU();
  backends::Cudnn saved = backends::cudnn();
  backends::cudnn().allow_tf32 = false;  // f32 in FMA math, to compare at f32 tolerances
  struct Geo {
    const char* what;
    Shape x, w;
    Pair stride, padding, dilation;
    int64_t groups;
  };
  const Geo geos[] = {{"3x3 pad 1", {2, 3, 9, 8}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
                      {"stride 2, rectangular kernel", {2, 4, 11, 10}, {6, 4, 3, 2}, {2, 2}, {1, 0}, {1, 1}, 1},
                      {"dilation 2", {1, 2, 10, 10}, {3, 2, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 1},
                      {"groups 2", {2, 4, 7, 7}, {6, 2, 3, 3}, {1, 2}, {1, 1}, {1, 1}, 2},
                      {"1x1", {3, 5, 4, 4}, {7, 5, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1}};
  for (bool benchmark : {false, true}) {
    backends::cudnn().benchmark = benchmark;
    for (DType t : kFloatTypes) {
      for (const Geo& g : geos) {
        std::string w = std::string(g.what) + " " + dtype_name(t) + (benchmark ? " (benchmark)" : "");
        // f32 sums of up to C*KH*KW products in another order than the CPU's im2col + sgemm; in
        // benchmark mode cuDNN may pick a backward-data algorithm that adds the dilated kernel's
        // passes in f16 (11 units of the last place seen on an H200)
        const double slack = t == DType::F64 ? 100.0 : (t == DType::F32 ? 20.0 : (benchmark ? 4.0 : 2.0));
        Tensor x = data(g.x, t, 110), wt = data(g.w, t, 111), b = data({g.w[0]}, t, 112);
        auto conv = [&](const Inputs& in) {
          return conv2d(in[0], in[1], in[2], g.stride, g.padding, g.dilation, g.groups);
        };
        compare("conv2d " + w, conv, {x, wt, b}, slack);
        compare(
            "conv2d no bias " + w,
            [&](const Inputs& in) { return conv2d(in[0], in[1], Tensor(), g.stride, g.padding, g.dilation, g.groups); },
            {x, wt}, slack);
        compare(
            "conv2d of a strided view " + w, [&](const Inputs& in) { return conv(in); },
            {data(g.x, t, 113).transpose(2, 3).contiguous().transpose(2, 3), wt, b}, slack);
        Tensor y = conv({x, wt, b});
        Tensor gy = data(y.sizes(), t, 114);
        Attrs a{{"stride", g.stride}, {"padding", g.padding}, {"dilation", g.dilation}, {"groups", g.groups}};
        Attrs ai = a, aw = a;
        ai.set("input_size", g.x);
        aw.set("weight_size", g.w);
        compare(
            "conv2d_backward_input " + w, [&](const Inputs& in) { return dispatch1("conv2d_backward_input", in, ai); },
            {gy, wt}, slack);
        compare(
            "conv2d_backward_weight " + w,
            [&](const Inputs& in) { return dispatch1("conv2d_backward_weight", in, aw); }, {gy, x},
            t == DType::F32 ? 100.0 : slack);
      }
    }
  }
  backends::cudnn().deterministic = true;
  compare(
      "conv2d deterministic",
      [](const Inputs& in) {
        return conv2d(in[0], in[1], Tensor(), {1, 1}, {1, 1});
      },
      {data({2, 3, 8, 8}, DType::F32, 115), data({4, 3, 3, 3}, DType::F32, 116)}, 20.0);
  backends::cudnn() = saved;
}

TEST_CASE("cuda: max_pool2d, avg_pool2d and their backward ops match the CPU", "[gpu]") {
  TR_REQUIRE_GPU();
  struct Geo {
    const char* what;
    Shape x;
    Pair k, s, p, d;
  };
  const Geo geos[] = {{"2x2", {2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0}, {1, 1}},
                      {"3x3 stride 2 pad 1 (overlapping)", {2, 3, 9, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}},
                      {"3x2 stride 1", {1, 2, 6, 5}, {3, 2}, {1, 1}, {1, 0}, {1, 1}},
                      {"dilation 2", {1, 2, 9, 9}, {3, 3}, {2, 1}, {1, 1}, {2, 2}}};
  for (DType t : kFloatTypes) {
    for (const Geo& g : geos) {
      std::string w = std::string(g.what) + " " + dtype_name(t);
      Tensor x = ties(g.x, t, 120);  // ties: the first maximum wins on both devices
      compare("max_pool2d " + w, [&](const Inputs& in) { return max_pool2d(in[0], g.k, g.s, g.p, g.d); }, {x});
      auto both = [&](const Tensor& in) {
        return dispatch("max_pool2d", {in}, {{"kernel", g.k}, {"stride", g.s}, {"padding", g.p}, {"dilation", g.d}});
      };
      auto c = both(x), gg = both(x.to(gpu()));
      check_equal("max_pool2d indices " + w, c[1], gg[1]);
      // the backward through autograd (window attrs) and as the bare op (scatter)
      Tensor gy = data(c[0].sizes(), t, 121);
      compare("max_pool2d backward " + w,
              [&](const Inputs& in) {
                Tensor xi = in[0].detach().requires_grad_(true);
                max_pool2d(xi, g.k, g.s, g.p, g.d).backward(in[1]);
                return xi.grad();
              },
              {x, gy});
      compare("max_pool2d_backward bare " + w,
              [&](const Inputs& in) {
                return dispatch1("max_pool2d_backward", {in[0], in[1]}, {{"input_size", g.x}});
              },
              {gy, c[1]});
      if (g.d[0] != 1) continue;  // avg_pool2d has no dilation
      for (bool cip : {true, false}) {
        std::string wc = w + (cip ? " count_include_pad" : "");
        Tensor xa = data(g.x, t, 122);
        compare(
            "avg_pool2d " + wc, [&](const Inputs& in) { return avg_pool2d(in[0], g.k, g.s, g.p, cip); }, {xa}, 2.0);
        compare(
            "avg_pool2d backward " + wc,
            [&](const Inputs& in) {
              Tensor xi = in[0].detach().requires_grad_(true);
              avg_pool2d(xi, g.k, g.s, g.p, cip).backward(in[1]);
              return xi.grad();
            },
            {xa, data(avg_pool2d(xa, g.k, g.s, g.p, cip).sizes(), t, 123)}, 2.0);
      }
    }
  }
  Tensor bad = from_vector({0, 1, 2, 3, 4, 9}, {1, 2, 1, 3}, DType::I64).to(gpu());
  CHECK_THROWS_WITH(dispatch1("max_pool2d_backward", {data({1, 2, 1, 3}, DType::F32, 124).to(gpu()), bad},
                              {{"input_size", Shape{1, 2, 2, 3}}})
                        .to(kCPU),  // raised at the next wait for the device
                    Catch::Matchers::Contains("outside"));
}

TEST_CASE("cuda: threshold_backward (relu's backward) matches the CPU", "[gpu]") {
  TR_REQUIRE_GPU();
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64}) {
    Tensor g = data({7, 9}, t, 220), y = ties({7, 9}, t, 221);  // ties: values equal to the threshold
    for (double th : {0.0, 0.5})
      compare(std::string("threshold_backward ") + dtype_name(t),
              [th](const Inputs& in) {
                return dispatch1("threshold_backward", in, {{"threshold", th}});
              },
              {g, y});
    compare(std::string("threshold_backward broadcast ") + dtype_name(t),
            [](const Inputs& in) {
              return dispatch1("threshold_backward", in, {{"threshold", 0.0}});
            },
            {g, ties({9}, t, 222)});
  }
}

TEST_CASE("cuda: gelu_backward matches the CPU", "[gpu]") {
  TR_REQUIRE_GPU();
  for (DType t : kFloatTypes)
    for (const char* approx : {"none", "tanh"}) {
      const std::string a = approx;
      compare(std::string("gelu_backward ") + approx + " " + dtype_name(t),
              [a](const Inputs& in) {
                return dispatch1("gelu_backward", in, {{"approximate", a}});
              },
              {data({7, 9}, t, 223), data({7, 9}, t, 224)});
      compare(std::string("gelu_backward broadcast ") + approx + " " + dtype_name(t),
              [a](const Inputs& in) {
                return dispatch1("gelu_backward", in, {{"approximate", a}});
              },
              {data({7, 9}, t, 225), data({9}, t, 226)});
    }
}

TEST_CASE("cuda: softmax_backward matches the CPU", "[gpu]") {
  TR_REQUIRE_GPU();
  for (DType t : kFloatTypes)
    for (bool log : {false, true})
      for (int64_t dim : {0, 1}) {
        Tensor x = data({7, 9}, t, 227);
        Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
        compare(std::string("softmax_backward ") + (log ? "log " : "") + std::to_string(dim) + " " + dtype_name(t),
                [log, dim](const Inputs& in) {
                  return dispatch1("softmax_backward", in, {{"dim", dim}, {"log", log}});
                },
                {data({7, 9}, t, 228), y});
      }
}

// ---------------------------------------------------------------- batch norm

TEST_CASE("cuda: batch_norm's fused ops match the CPU in training and eval, with gradients", "[gpu]") {
  TR_REQUIRE_GPU();
  for (DType t : kFloatTypes) {
    // the last: the CNN's first batch norm (100352 values per channel)
    for (Shape s : {Shape{6, 4}, Shape{3, 5, 7}, Shape{4, 3, 9, 11}, Shape{2, 600, 3, 3}, Shape{128, 32, 28, 28}}) {
      if (s[0] == 128 && t != DType::F32) continue;
      const int64_t C = s[1];
      std::string w = shape_str(s) + " " + dtype_name(t);
      Tensor x = data(s, t, 210, -3.0, 5.0), wt = data({C}, t, 211), b = data({C}, t, 212);
      Tensor gy = data(s, t, 213);
      auto train = [&](const Inputs& in) {
        Tensor xi = in[0].detach().requires_grad_(true), wi = in[1].detach().requires_grad_(true),
               bi = in[2].detach().requires_grad_(true);
        BatchNormOut r = batch_norm(xi, Tensor(), Tensor(), wi, bi, true, 1e-5);
        r.output.backward(in[3]);
        return std::vector<Tensor>{r.output.detach(), r.mean, r.var, xi.grad(), wi.grad(), bi.grad()};
      };
      auto c = train({x, wt, b, gy}), g = train(to_gpu({x, wt, b, gy}));
      const char* names[] = {"y", "mean", "var", "dx", "dw", "db"};
      for (size_t i = 0; i < c.size(); ++i)
        check_close(std::string("batch_norm training ") + names[i] + " " + w, c[i], g[i], scaled(tol_for(t), 8.0));
      Tensor rm = data({C}, t, 214), rv = data({C}, t, 215, 0.5, 2.0);
      compare(
          "batch_norm eval " + w,
          [](const Inputs& in) { return batch_norm(in[0], in[3], in[4], in[1], in[2], false, 1e-5).output; },
          {x, wt, b, rm, rv}, 4.0);
    }
  }
}

TEST_CASE("cuda: the fused layer norm matches the CPU, with gradients", "[gpu]") {
  TR_REQUIRE_GPU();
  for (DType t : kFloatTypes) {
    for (Shape s : {Shape{5, 7}, Shape{3, 4, 33}, Shape{32, 128, 128}, Shape{2, 1000}, Shape{0, 6}}) {
      const int64_t n = s.back();
      std::string w = shape_str(s) + " " + dtype_name(t);
      Tensor x = data(s, t, 230, -3.0, 5.0), wt = data({n}, t, 231), b = data({n}, t, 232), gy = data(s, t, 233);
      auto train = [&](const Inputs& in) {
        Tensor xi = in[0].detach().requires_grad_(true), wi = in[1].detach().requires_grad_(true),
               bi = in[2].detach().requires_grad_(true);
        Tensor y = layer_norm(xi, {n}, wi, bi, 1e-5);
        y.backward(in[3]);
        return std::vector<Tensor>{y.detach(), xi.grad(), wi.grad(), bi.grad()};
      };
      auto c = train({x, wt, b, gy}), g = train(to_gpu({x, wt, b, gy}));
      const char* names[] = {"y", "dx", "dw", "db"};
      for (size_t i = 0; i < c.size(); ++i)
        check_close(std::string("layer_norm ") + names[i] + " " + w, c[i], g[i], scaled(tol_for(t), 8.0));
    }
  }
}

TEST_CASE("cuda: layer norm to bf16 and the fused residual add match the CPU, with gradients", "[gpu]") {
  TR_REQUIRE_GPU();
  for (DType ht : {DType::F32, DType::BF16}) {
    for (Shape s : {Shape{5, 7}, Shape{3, 40, 96}, Shape{0, 6}}) {
      const int64_t n = s.back();
      const std::string w = shape_str(s) + " h " + dtype_name(ht);
      Tensor x = data(s, DType::F32, 240, -3.0, 5.0), h = data(s, DType::F32, 241).to(ht),
             wt = data({n}, DType::F32, 242), b = data({n}, DType::F32, 243), gs = data(s, DType::F32, 244),
             gy = data(s, DType::F32, 245);
      auto train = [&](const Inputs& in) {
        Tensor xi = in[0].detach().requires_grad_(true), hi = in[1].detach().requires_grad_(true),
               wi = in[2].detach().requires_grad_(true), bi = in[3].detach().requires_grad_(true);
        auto [si, yi] = add_layer_norm(xi, hi, {n}, wi, bi, 1e-5, DType::BF16);
        Tensor zi = layer_norm(xi, {n}, wi, bi, 1e-5, DType::BF16);
        (sum(si * in[4]) + sum(yi.to(DType::F32) * in[5]) + sum(zi.to(DType::F32) * in[5])).backward();
        return std::vector<Tensor>{si.detach(), yi.detach(), zi.detach(), xi.grad(), hi.grad(), wi.grad(), bi.grad()};
      };
      auto c = train({x, h, wt, b, gs, gy}), g = train(to_gpu({x, h, wt, b, gs, gy}));
      const char* names[] = {"s", "y", "layer_norm to bf16", "dx", "dh", "dw", "db"};
      for (size_t i = 0; i < c.size(); ++i) {
        CHECK(c[i].dtype() == g[i].dtype());
        check_close(std::string("add_layer_norm ") + names[i] + " " + w, c[i], g[i],
                    scaled(tol_for(c[i].dtype()), 8.0));
      }
    }
  }
}

// ---------------------------------------------------------------- fused optimizer steps

TEST_CASE("cuda: the fused SGD and Adam steps match the CPU's", "[gpu]") {
  TR_REQUIRE_GPU();
  // more than one chunk of a launch (kFusedChunk elements), odd sizes, and two dtypes in one call
  const std::vector<Shape> shapes{{3, 5}, {70001}, {1}, {129, 7}};
  for (bool amsgrad : {false, true}) {
    auto run = [&](Device dev) {
      std::vector<Tensor> ps, gs, ms, vs, xs;
      std::vector<double> steps;
      for (size_t i = 0; i < shapes.size(); ++i) {
        const DType t = i == 2 ? DType::F64 : DType::F32;
        ps.push_back(data(shapes[i], t, 130 + i).to(dev));
        gs.push_back(data(shapes[i], t, 140 + i).to(dev));
        ms.push_back(data(shapes[i], t, 150 + i, -0.1, 0.1).to(dev));
        vs.push_back(data(shapes[i], t, 160 + i, 0.0, 0.1).to(dev));
        if (amsgrad) xs.push_back(data(shapes[i], t, 170 + i, 0.0, 0.1).to(dev));
        steps.push_back(double(i + 1));
      }
      fused_adam_(ps, gs, ms, vs, xs, steps, {1e-2, 0.9, 0.999, 1e-8, 0.1, true, amsgrad, amsgrad});
      std::vector<Tensor> out = ps;
      out.insert(out.end(), ms.begin(), ms.end());
      out.insert(out.end(), vs.begin(), vs.end());
      out.insert(out.end(), xs.begin(), xs.end());
      return out;
    };
    auto c = run(kCPU), g = run(gpu());
    for (size_t i = 0; i < c.size(); ++i)
      check_close("fused adam tensor " + std::to_string(i) + (amsgrad ? " amsgrad" : ""), c[i], g[i],
                  scaled(tol_for(c[i].dtype()), 2.0));
  }
  for (bool first : {true, false}) {
    auto run = [&](Device dev) {
      std::vector<Tensor> ps, gs, bs;
      for (size_t i = 0; i < shapes.size(); ++i) {
        ps.push_back(data(shapes[i], DType::F32, 180 + i).to(dev));
        gs.push_back(data(shapes[i], DType::F32, 190 + i).to(dev));
        bs.push_back(data(shapes[i], DType::F32, 200 + i).to(dev));
      }
      fused_sgd_(ps, gs, bs, std::vector<bool>(shapes.size(), first), {0.1, 0.9, 0.0, 1e-4, true, false});
      std::vector<Tensor> out = ps;
      out.insert(out.end(), bs.begin(), bs.end());
      return out;
    };
    auto c = run(kCPU), g = run(gpu());
    for (size_t i = 0; i < c.size(); ++i)
      check_close("fused sgd tensor " + std::to_string(i) + (first ? " first step" : ""), c[i], g[i],
                  scaled(tol_for(c[i].dtype()), 2.0));
  }
}

// ---------------------------------------------------------------- indexing

TEST_CASE("cuda: index_select, index_add, gather and scatter_add match the CPU", "[gpu]") {
  TR_REQUIRE_GPU();
  Tensor idx = from_vector({3, 0, -1, 3, 2, 3}, {6}, DType::I64);  // duplicates and a negative index
  Tensor idx32 = cast(idx, DType::I32);
  for (DType t : kAllTypes) {
    std::string d = dtype_name(t);
    Tensor x = t == DType::Bool ? data({5, 4, 3}, DType::F64, 100) > 0.0 : data({5, 4, 3}, t, 100, 0.0, 9.0);
    for (int64_t dim : {0, 1, 2}) {
      Tensor i =
          dim == 2 ? from_vector({2, 0, -3, 2}, {4}, DType::I64) : from_vector({1, 0, -1, 3, 1}, {5}, DType::I64);
      std::string w = " " + d + " dim " + std::to_string(dim);
      compare("index_select" + w, [&](const Inputs& in) { return index_select(in[0], dim, in[1]); }, {x, i});
      compare("index_select transposed" + w,
              [&](const Inputs& in) { return index_select(in[0].transpose(0, 2), dim, in[1]); },
              {x.transpose(0, 2).contiguous(), i});
      compare("index_select int32" + w, [&](const Inputs& in) { return index_select(in[0], dim, in[1]); },
              {x, cast(i, DType::I32)});
    }
    compare("index_select 0-dim index " + d, [](const Inputs& in) { return index_select(in[0], 1, in[1]); },
            {x, scalar_tensor(2, DType::I64)});
    Tensor g_idx = from_vector({0, 2, 2, 1, -1, 0, 1, 1}, {2, 4, 1}, DType::I64);
    compare("gather dim 1 " + d, [&](const Inputs& in) { return gather(in[0], 1, in[1]); }, {x, g_idx});
    compare("gather dim 2 transposed " + d, [&](const Inputs& in) { return gather(in[0].transpose(0, 1), 2, in[1]); },
            {x, g_idx.view({4, 2, 1})});
    if (t == DType::Bool) continue;  // index_add and scatter_add are numeric, as on the CPU
    // duplicates accumulate (atomics on the GPU, in order on the CPU)
    const double slack = (t == DType::F16 || t == DType::BF16) ? 4.0 : 1.0;
    Tensor src = data({5, 6, 3}, t, 101, 0.0, 5.0);
    compare(
        "index_add " + d, [&](const Inputs& in) { return index_add(in[0], 1, in[1], in[2]); }, {x, idx, src}, slack);
    compare(
        "index_add int32 strided src " + d,
        [&](const Inputs& in) { return index_add(in[0], 1, in[1], in[2].transpose(0, 2)); },
        {x, idx32, data({3, 6, 5}, t, 108, 0.0, 5.0)}, slack);
    Tensor s_src = data({2, 4, 3}, t, 102, 0.0, 5.0);
    compare(
        "scatter_add dim 1 " + d, [&](const Inputs& in) { return scatter_add(in[0], 1, in[1], in[2]); },
        {x, g_idx, s_src}, slack);
    compare(
        "scatter_add dim 0 strided src " + d,
        [&](const Inputs& in) { return scatter_add(in[0], 0, in[1], in[2].slice(2, 0, 1)); },
        {x, from_vector({0, 4, 4, 4, 1, 0, -2, 0}, {2, 4, 1}, DType::I64), s_src}, slack);
  }
  // many duplicates into few slots: exact in f64 and i64 up to rounding order
  Tensor many = cast(data({4000}, DType::F64, 103, 0.0, 7.0), DType::I64);
  compare(
      "index_add 4000 rows into 7 f64", [](const Inputs& in) { return index_add(in[0], 0, in[1], in[2]); },
      {zeros({7, 2}, DType::F64), many, data({4000, 2}, DType::F64, 104)}, 100.0);
  compare("index_add 4000 rows into 7 u8", [](const Inputs& in) { return index_add(in[0], 0, in[1], in[2]); },
          {zeros({7, 2}, DType::U8), many, data({4000, 2}, DType::U8, 104, 0.0, 3.0)});
  compare("embedding", [](const Inputs& in) { return embedding(in[0], in[1]); },
          {data({10, 4}, DType::F32, 105), from_vector({1, 9, 9, 0, 3, 2}, {2, 3}, DType::I64)});
  compare("one_hot", [](const Inputs& in) { return one_hot(in[0], 5); },
          {from_vector({1, 4, 0, 4}, {2, 2}, DType::I64)});
  compare("cat",
          [](const Inputs& in) {
            return cat({in[0], in[1].t()}, 1);
          },
          {data({3, 2}, DType::F32, 106), data({4, 3}, DType::F32, 107)});
}

TEST_CASE("cuda: out-of-range indices throw the CPU's error", "[gpu]") {
  TR_REQUIRE_GPU();
  Tensor x = data({4, 5}, DType::F32, 110).to(gpu());
  Tensor bad = from_vector({1, 7, 2}, {3}, DType::I64).to(gpu());
  Tensor neg_bad = from_vector({0, -6}, {2}, DType::I64).to(gpu());
  using Catch::Matchers::Contains;
  // the launch returns; the error comes at the next wait for the device (here: the copy to the host)
  Tensor r;
  CHECK_NOTHROW(r = index_select(x, 1, bad));
  CHECK_THROWS_WITH(r.to(kCPU), Contains("index_select: index 7 is out of bounds for dimension with size 5") &&
                                    Contains("raised at the next wait for the device"));
  CHECK_THROWS_WITH(index_select(x, 1, neg_bad).to(kCPU), Contains("index -1 is out of bounds"));
  CHECK_THROWS_WITH(index_add(x, 0, bad, zeros({3, 5}, TensorOptions().device(gpu()))).to(kCPU),
                    Contains("out of bounds"));
  Tensor g = from_vector({0, 9, 1, 2}, {2, 2}, DType::I64).to(gpu());
  CHECK_THROWS_WITH(gather(x, 1, g).sum().item(), Contains("index 9 is out of bounds for dimension 1 with size 5"));
  CHECK_THROWS_WITH(scatter_add(x, 1, g, ones({2, 2}, TensorOptions().device(gpu()))).to(kCPU),
                    Contains("out of bounds"));
  Tensor logits = zeros({3, 4}, TensorOptions().device(gpu()));
  Tensor loss;
  CHECK_NOTHROW(loss = cross_entropy(logits, from_vector({1, 4, 0}, {3}, DType::I64).to(gpu())));
  CHECK_THROWS_WITH(loss.item(), Contains("cross_entropy: target 4 is out of bounds for 4 classes"));
  cuda::synchronize(0);  // nothing left pending: no error
  // the device stays usable after the error
  CHECK(sum(x).item() == Approx(sum(x.to(kCPU)).item()).epsilon(1e-5));
}

// ---------------------------------------------------------------- random

TEST_CASE("cuda: uniform_, normal_ and dropout_mask draw the CPU's numbers", "[gpu]") {
  TR_REQUIRE_GPU();
  for (DType t : kFloatTypes) {
    std::string d = dtype_name(t);
    Generator gc(1234), gg(1234);
    Tensor c = rand({37, 11}, t, &gc), g = rand({37, 11}, TensorOptions(t).device(gpu()), &gg);
    check_equal("rand " + d, c, g);  // the same f64 value, rounded once
    Tensor cn = randn({1001}, t, &gc), gn = randn({1001}, TensorOptions(t).device(gpu()), &gg);
    // Box-Muller's log / sin / cos: CUDA's f64 versions are within 2 ulp of glibc's, not equal
    check_close("randn " + d, cn, gn, t == DType::F64 ? Tol{1e-14, 1e-15} : tol_for(t));
    Tensor like_c = empty({9, 13}, t), like_g = empty({9, 13}, TensorOptions(t).device(gpu()));
    check_equal("dropout_mask " + d, dropout_mask(like_c, 0.3, &gc), dropout_mask(like_g, 0.3, &gg));
    // in place on a non-contiguous view, ranges whose fused multiply-add is exact
    Tensor vc = zeros({6, 10}, t), vg = zeros({6, 10}, TensorOptions(t).device(gpu()));
    Tensor wc = vc.t().slice(0, 1, 10, 2), wg = vg.t().slice(0, 1, 10, 2);
    init::uniform_(wc, -2.0, 2.0, &gc);
    init::uniform_(wg, -2.0, 2.0, &gg);
    check_equal("uniform_(-2, 2) strided " + d, vc, vg);
    init::normal_(wc, 0.5, 4.0, &gc);
    init::normal_(wg, 0.5, 4.0, &gg);
    check_close("normal_(0.5, 4) strided " + d, vc, vg, t == DType::F64 ? Tol{1e-14, 1e-14} : tol_for(t));
    CHECK(gc.get_state() == gg.get_state());
  }
  // f64 over a long stream: uniform bit for bit, and normal to the last bits
  Generator gc(99), gg(99);
  check_equal("rand 1e6 f64", rand({1000000}, DType::F64, &gc),
              rand({1000000}, TensorOptions(DType::F64).device(gpu()), &gg));
  Tensor nc = randn({100000}, DType::F64, &gc), ng = randn({100000}, TensorOptions(DType::F64).device(gpu()), &gg);
  check_close("randn 1e5 f64", nc, ng, {1e-14, 1e-15});
  CHECK(equal(cast(nc, DType::F32), ng.to(kCPU, DType::F32)));
}

// ---------------------------------------------------------------- autograd end to end

TEST_CASE("cuda: a training step's gradients match the CPU", "[gpu]") {
  TR_REQUIRE_GPU();
  // logits = gelu(x W1^T + b1) W2^T; loss = cross_entropy + var penalty; f64 for tight tolerances
  auto run = [](Device dev) {
    Generator g(5);
    Tensor x = randn({16, 10}, DType::F64, &g).to(dev);
    Tensor w1 = randn({32, 10}, DType::F64, &g).to(dev).requires_grad_(true);
    Tensor b1 = randn({32}, DType::F64, &g).to(dev).requires_grad_(true);
    Tensor w2 = randn({4, 32}, DType::F64, &g).to(dev).requires_grad_(true);
    Tensor target = from_vector({0, 1, 2, 3, 3, 2, 1, 0, 0, 0, 1, 1, 2, 2, 3, 3}, {16}, DType::I64).to(dev);
    Tensor h = gelu(linear(x, w1, b1));
    Tensor logits = linear(dropout(h, 0.2, true, &g), w2);
    Tensor loss = cross_entropy(logits, target) + var(h, {1}).mean() * 0.1 + amax(softmax(logits, 1)) * 0.5;
    loss.backward();
    return std::vector<Tensor>{loss.detach(), w1.grad(), b1.grad(), w2.grad()};
  };
  auto c = run(kCPU), g = run(gpu());
  const char* names[] = {"loss", "dW1", "db1", "dW2"};
  for (size_t i = 0; i < c.size(); ++i) check_close(names[i], c[i], g[i], {1e-10, 1e-12});
}

TEST_CASE("cuda: a CNN training step's gradients match the CPU (conv, batch norm, relu, pooling, dropout)", "[gpu]") {
  TR_REQUIRE_GPU();
  backends::Cudnn saved = backends::cudnn();
  backends::cudnn().allow_tf32 = false;
  // f64 for tight tolerances: a wrong index, window or coefficient shows at 1e-3, rounding at 1e-12
  auto run = [](Device dev) {
    Generator g(9);
    auto param = [&](const Shape& s, double scale) {
      return (randn(s, DType::F64, &g) * scale).to(dev).requires_grad_(true);
    };
    Tensor x = randn({8, 2, 12, 12}, DType::F64, &g).to(dev);
    Tensor w1 = param({6, 2, 3, 3}, 0.3), b1 = param({6}, 0.1), g1 = param({6}, 1.0), h1 = param({6}, 0.1);
    Tensor w2 = param({8, 6, 3, 3}, 0.2), g2 = param({8}, 1.0), h2 = param({8}, 0.1);
    Tensor wl = param({5, 8 * 3 * 3}, 0.1);
    Tensor target = from_vector({0, 1, 2, 3, 4, 0, 1, 2}, {8}, DType::I64).to(dev);
    Tensor y = conv2d(x, w1, b1, {1, 1}, {1, 1});
    y = relu(batch_norm(y, Tensor(), Tensor(), g1, h1, true).output);
    y = max_pool2d(y, {2, 2});                    // 6 x 6
    y = conv2d(y, w2, Tensor(), {2, 2}, {1, 1});  // 3 x 3, strided
    y = relu(batch_norm(y, Tensor(), Tensor(), g2, h2, true).output);
    y = avg_pool2d(y, {3, 3}, {1, 1}, {1, 1});  // padded windows
    Tensor logits = linear(dropout(flatten(y, 1), 0.25, true, &g), wl);
    Tensor loss = cross_entropy(logits, target);
    loss.backward();
    return std::vector<Tensor>{loss.detach(), w1.grad(), b1.grad(), g1.grad(), h1.grad(),
                               w2.grad(),     g2.grad(), h2.grad(), wl.grad()};
  };
  auto c = run(kCPU), g = run(gpu());
  const char* names[] = {"loss", "dw1", "db1", "dgamma1", "dbeta1", "dw2", "dgamma2", "dbeta2", "dwl"};
  for (size_t i = 0; i < c.size(); ++i) check_close(names[i], c[i], g[i], {1e-9, 1e-12});
  backends::cudnn() = saved;
}

TEST_CASE("cuda emulator: host code that touches device memory is stopped with a message", "[gpu][emulator]") {
  TR_REQUIRE_GPU();
  if (cuda::device_description(0).find("CUDA emulator") == std::string::npos) {
    WARN("a real GPU: host reads of device memory are the hardware's business (a fault, or HMM)");
    return;
  }
  Tensor t = ones({16}, TensorOptions().device(gpu()));
  t.sum().item();  // the fill has run
  int err[2];
  REQUIRE(pipe(err) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(err[1], 2);
    volatile float v = *static_cast<const float*>(t.raw_data());  // host code reading device memory
    (void)v;
    _exit(0);
  }
  close(err[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = read(err[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  close(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK_THAT(out, Catch::Matchers::Contains("host code read or wrote device memory") &&
                      Catch::Matchers::Contains("cuda:0 + "));
  // the device itself reads it as before
  CHECK(t.sum().item() == 16.0);
}

// ---------------------------------------------------------------- everywhere

TEST_CASE("cuda: Device(\"cuda\") without a usable GPU is one clear error", "[gpu][device]") {
  const int n = cuda::device_count();
  if (n == 0) {
    using Catch::Matchers::Contains;
    CHECK_THROWS_WITH(Device("cuda"), Contains("CUDA is not available"));
    CHECK_THROWS_WITH(Device("cuda:1"), Contains("CUDA is not available"));
    CHECK_THROWS_WITH(Device("cuda"), Contains(cuda::unavailable_reason()));
    CHECK_FALSE(cuda::is_available());
  } else {
    CHECK(Device("cuda").is_cuda());
    CHECK_THROWS_WITH(Device("cuda:" + std::to_string(n)), Catch::Matchers::Contains("CUDA device(s) are visible"));
  }
  CHECK_THROWS_WITH(Device("cuda:x"), Catch::Matchers::Contains("invalid device string"));
}

namespace {
// The ops without a CUDA kernel, each with its reason; every other op that computes (views need
// no kernel) must have one, so a new op without one fails the case below.
const std::map<std::string, std::string>& cpu_only_ops() {
  static const std::map<std::string, std::string> ops = {
      {"_foreach_non_finite", "any_non_finite runs the composite sum(t * 0) on other devices"},
  };
  return ops;
}
}  // namespace

TEST_CASE("cuda: every op has a CUDA kernel in a CUDA build, but the listed CPU-only ones", "[gpu][registry]") {
  if (!cuda::is_compiled()) {
    WARN("this build has no CUDA backend: " << cuda::unavailable_reason());
    return;
  }
  int with_kernel = 0;
  for (auto& [name, op] : OpRegistry::get().all()) {
    INFO("op: " << name);
    if (op.kind == OpKind::View) continue;  // a view aliases its input on any device
    const bool has = op.kernels[int(DeviceType::CUDA)] != nullptr;
    if (cpu_only_ops().count(name)) {
      CHECK_FALSE(has);  // it has one now: take it off the list
    } else {
      CHECK(has);
      with_kernel += has;
    }
  }
  CHECK(with_kernel >= 60);
  for (auto& [name, why] : cpu_only_ops()) {
    INFO("CPU-only entry for an unknown op: " << name);
    CHECK(OpRegistry::get().find(name) != nullptr);
  }
}

TEST_CASE("cuda: the [gpu] cases call every op of the pointwise tables, and each call runs on the CPU", "[registry]") {
  // what the [gpu] cases compare: every line of every table, with attrs the op accepts
  for (const auto* calls : {&unary_calls(), &binary_calls(), &compare_calls(), &predicate_calls()}) {
    for (auto& op : *calls) {
      INFO("call: " << op.label);
      REQUIRE(OpRegistry::get().find(op.op) != nullptr);
      const bool binary = calls == &binary_calls() || calls == &compare_calls();
      Tensor x = data({2, 3}, op.dtypes == DtypeSet::FLOAT ? DType::F32 : DType::F64, 1, 0.5, 2.0);
      CHECK_NOTHROW(binary ? op({binary_lhs(op.op, x), x}) : op({x}));
    }
  }
  for (auto& [op, variants] : attr_variants()) {
    INFO("attr variants of an unknown op: " << op);
    CHECK(OpRegistry::get().find(op) != nullptr);
  }
}

TEST_CASE("cuda: cuda_info reports the cuBLAS, cuDNN and NCCL versions without a GPU", "[gpu][info]") {
  std::string s = cuda::cuda_info();
  INFO(s);
  if (!cuda::is_compiled()) {
    CHECK(s == "not compiled in");
    return;
  }
  CHECK(s.find("cuBLAS ") != std::string::npos);
  CHECK(s.find("cuDNN 9.") != std::string::npos);
  CHECK(s.find("NCCL 2.") != std::string::npos);
  CHECK(s.find("CUDA runtime 13.") != std::string::npos);
}

// ---------------------------------------------------------------- the CPU's exact-size caching allocator

namespace {
// malloc / free with counters, as the raw functions of an ExactSizeCachingAllocator.
struct RawCounter {
  int allocs = 0, frees = 0;
  int64_t live_bytes = 0;
  int64_t limit = -1;  // raw allocations beyond this many live bytes fail (nullptr)
  std::map<void*, size_t> sizes;
  ExactSizeCachingAllocator make() {
    return ExactSizeCachingAllocator(
        [this](size_t n) -> void* {
          if (limit >= 0 && live_bytes + int64_t(n) > limit) return nullptr;
          void* p = std::malloc(n);
          ++allocs;
          live_bytes += int64_t(n);
          sizes[p] = n;
          return p;
        },
        [this](void* p) {
          ++frees;
          live_bytes -= int64_t(sizes.at(p));
          sizes.erase(p);
          std::free(p);
        });
  }
};
}  // namespace

TEST_CASE("exact-size caching allocator: sizes round to 512 B below 1 MiB and to 2 MiB above", "[allocator]") {
  CHECK(ExactSizeCachingAllocator::round_size(0) == 512);
  CHECK(ExactSizeCachingAllocator::round_size(1) == 512);
  CHECK(ExactSizeCachingAllocator::round_size(512) == 512);
  CHECK(ExactSizeCachingAllocator::round_size(513) == 1024);
  CHECK(ExactSizeCachingAllocator::round_size((1u << 20) - 1) == (1u << 20));
  CHECK(ExactSizeCachingAllocator::round_size(1u << 20) == (2u << 20));
  CHECK(ExactSizeCachingAllocator::round_size((2u << 20) + 1) == (4u << 20));
}

TEST_CASE("exact-size caching allocator: freed blocks are reused for requests of the same rounded size",
          "[allocator]") {
  RawCounter raw;
  {
    ExactSizeCachingAllocator a = raw.make();
    void* p = a.allocate(1000);
    CHECK(raw.allocs == 1);
    a.deallocate(p, 1000);
    CHECK(raw.frees == 0);      // kept in the cache
    void* q = a.allocate(900);  // rounds to the same 1024 bytes
    CHECK(q == p);
    CHECK(raw.allocs == 1);
    CHECK(a.stats().cache_hits == 1);
    void* r = a.allocate(5000);  // another size: a new block
    CHECK(r != q);
    CHECK(raw.allocs == 2);
    a.deallocate(q, 900);
    a.deallocate(r, 5000);
    void* s1 = a.allocate(1024);
    void* s2 = a.allocate(1024);  // the one cached 1024 block is taken: a fresh one
    CHECK(s1 == p);
    CHECK(s2 != s1);
    CHECK(raw.allocs == 3);
    a.deallocate(s1, 1024);
    a.deallocate(s2, 1024);
    CHECK(a.stats().num_allocs == 5);
    CHECK(a.stats().cache_hits == 2);
  }
  // the destructor returns every cached block
  CHECK(raw.frees == raw.allocs);
  CHECK(raw.live_bytes == 0);
}

TEST_CASE("exact-size caching allocator: current, peak and reserved statistics", "[allocator]") {
  RawCounter raw;
  ExactSizeCachingAllocator a = raw.make();
  void* p = a.allocate(1000);  // 1024
  void* q = a.allocate(3000);  // 3072
  MemoryStats s = a.stats();
  CHECK(s.allocated == 4096);
  CHECK(s.peak_allocated == 4096);
  CHECK(s.reserved == 4096);
  a.deallocate(q, 3000);
  s = a.stats();
  CHECK(s.allocated == 1024);
  CHECK(s.peak_allocated == 4096);  // the high-water mark stays
  CHECK(s.reserved == 4096);        // the freed block is cached, still reserved
  a.reset_peak();
  CHECK(a.stats().peak_allocated == 1024);
  void* r = a.allocate(100);  // 512
  CHECK(a.stats().peak_allocated == 1536);
  a.deallocate(p, 1000);
  a.deallocate(r, 100);
  CHECK(a.stats().allocated == 0);
  CHECK(a.stats().reserved == 4096 + 512);
  a.deallocate(p, 1000);  // a second free of the same block is ignored
  CHECK(a.stats().allocated == 0);
}

TEST_CASE("exact-size caching allocator: empty_cache returns cached blocks, live blocks stay", "[allocator]") {
  RawCounter raw;
  ExactSizeCachingAllocator a = raw.make();
  void* p = a.allocate(2000);
  void* q = a.allocate(3u << 20);
  a.deallocate(q, 3u << 20);
  CHECK(a.stats().reserved == int64_t(2048 + (4u << 20)));
  a.empty_cache();
  CHECK(raw.frees == 1);
  CHECK(a.stats().reserved == 2048);
  CHECK(a.stats().allocated == 2048);
  void* q2 = a.allocate(3u << 20);  // nothing cached any more: a fresh raw allocation
  CHECK(raw.allocs == 3);
  a.deallocate(q2, 3u << 20);
  a.deallocate(p, 2000);
  a.empty_cache();
  CHECK(raw.live_bytes == 0);
  CHECK(a.stats().reserved == 0);
}

TEST_CASE("exact-size caching allocator: out of memory frees the cache and retries, then throws", "[allocator]") {
  RawCounter raw;
  raw.limit = 8192;
  ExactSizeCachingAllocator a = raw.make();
  void* p = a.allocate(4096);
  a.deallocate(p, 4096);       // 4096 cached
  void* q = a.allocate(6000);  // 6144: fits only after the cache is released
  CHECK(q != nullptr);
  CHECK(raw.frees == 1);
  CHECK(a.stats().reserved == 6144);
  using Catch::Matchers::Contains;
  // the request and the allocator's state
  CHECK_THROWS_WITH(a.allocate(4096), Contains("out of memory: tried to allocate 4.00 KiB; 6.00 KiB held by tensors, "
                                               "6.00 KiB reserved by the caching allocator"));
  CHECK_THROWS_AS(a.allocate(4096), OutOfMemoryError);
  a.deallocate(q, 6000);
}

TEST_CASE("cuda: out of memory is one error naming the device, the request, the allocator and the op", "[gpu]") {
  TR_REQUIRE_GPU();
  using Catch::Matchers::Contains;
  Tensor x = ones({1 << 20}, TensorOptions().device(gpu()));
  Tensor huge = x.expand({1 << 18, 1 << 20});  // a view; 1 TiB of f32 once materialised
  CHECK_THROWS_WITH(huge + 1.0, Contains("out of memory on cuda:0 (") && Contains("free of") &&
                                    Contains("tried to allocate 1.00 TiB") && Contains("held by tensors") &&
                                    Contains("(op add on inputs of shapes [262144, 1048576], []"));
  CHECK(sum(x).item() == 1 << 20);  // the device is still usable
}

TEST_CASE("exact-size caching allocator: the CPU allocator keeps statistics too", "[allocator]") {
  reset_peak_memory_stats(kCPU);
  MemoryStats before = memory_stats(kCPU);
  {
    Tensor t = empty({1000}, DType::F64);
    MemoryStats during = memory_stats(kCPU);
    CHECK(during.allocated >= before.allocated + 8000);
    CHECK(during.peak_allocated >= during.allocated);
  }
  CHECK(memory_stats(kCPU).allocated == before.allocated);
}

}  // namespace test_cuda
