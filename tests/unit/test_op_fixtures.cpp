// Every op of ops.h against PyTorch: forward values, and gradients of sum_k (out_k * w_k).sum(), read
// from tests/fixtures/op_fixtures.json (written by generators/make_op_fixtures.py). Random ops use
// our own Philox streams, so they are checked by their statistics instead.
#include <catch2/catch.hpp>
#include "unit/require_gpu.h"
#include "unit/fixtures.h"
#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include "autograd/engine.h"
#include "core/cuda_hooks.h"
#include "core/rng.h"
#include "ops/ops.h"

namespace test_op_fixtures {

using json = nlohmann::json;
using namespace tr;

namespace {

using Tensors = std::vector<Tensor>;
using OpFn = std::function<Tensors(const Tensors& x, const json& a)>;

// ---- fixture decoding ----
double decode_value(const json& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "nan") return NAN;
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
    throw std::runtime_error("op_fixtures.json: unknown special value '" + s + "'");
  }
  return v.get<double>();
}

std::vector<double> decode_values(const json& t) {
  std::vector<double> v;
  v.reserve(t.at("values").size());
  for (auto& e : t.at("values")) v.push_back(decode_value(e));
  return v;
}

Tensor decode(const json& t) {
  return from_vector(decode_values(t), t.at("shape").get<Shape>(), dtype_from_name(t.at("dtype").get<std::string>()));
}

std::string shape_str(const Shape& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  return o.str() + "]";
}

// Multi-index of flat element i in shape s, for messages.
std::string index_str(int64_t i, const Shape& s) {
  Shape idx(s.size());
  for (int64_t d = int64_t(s.size()) - 1; d >= 0; --d) {
    idx[size_t(d)] = s[size_t(d)] ? i % s[size_t(d)] : 0;
    i = s[size_t(d)] ? i / s[size_t(d)] : 0;
  }
  return shape_str(idx);
}

// Empty when `got` matches `want` (shape, dtype, and |got - want| <= atol + rtol |want| elementwise,
// NaN matching NaN, infinities exact); otherwise what differs, naming the first bad element.
std::string compare(const Tensor& got, const json& want, double rtol, double atol) {
  Shape ws = want.at("shape").get<Shape>();
  std::string wd = want.at("dtype").get<std::string>();
  if (!got.defined()) return "ours is undefined, torch has shape " + shape_str(ws);
  if (got.sizes() != ws) return "shape: ours " + shape_str(got.sizes()) + " vs torch " + shape_str(ws);
  if (wd != dtype_name(got.dtype())) return std::string("dtype: ours ") + dtype_name(got.dtype()) + " vs torch " + wd;
  std::vector<double> g = got.tolist(), w = decode_values(want);
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < g.size(); ++i) {
    double a = g[i], b = w[i];
    bool ok;
    if (std::isnan(b) || std::isnan(a))
      ok = std::isnan(a) && std::isnan(b);
    else if (std::isinf(b) || std::isinf(a))
      ok = a == b;
    else
      ok = std::abs(a - b) <= atol + rtol * std::abs(b);
    if (!ok && bad++ == 0) first = int64_t(i);
  }
  if (bad == 0) return "";
  std::ostringstream o;
  o.precision(17);
  double a = g[size_t(first)], b = w[size_t(first)];
  o << bad << " of " << g.size() << " elements differ; first at " << index_str(first, ws) << " (flat " << first
    << "): ours " << a << " vs torch " << b << " (|diff| " << std::abs(a - b) << ", allowed "
    << atol + rtol * std::abs(b) << " = atol " << atol << " + rtol " << rtol << " * |torch|)";
  return o.str();
}

// ---- attrs ----
Shape ints(const json& a, const char* k) { return a.at(k).get<Shape>(); }
int64_t i64(const json& a, const char* k) { return a.at(k).get<int64_t>(); }
double f64(const json& a, const char* k, double def) { return a.contains(k) ? decode_value(a.at(k)) : def; }
bool flag(const json& a, const char* k, bool def = false) { return a.contains(k) ? a.at(k).get<bool>() : def; }
std::optional<int64_t> opt_i64(const json& a, const char* k) {
  if (!a.contains(k) || a.at(k).is_null()) return std::nullopt;
  return a.at(k).get<int64_t>();
}
std::optional<double> opt_f64(const json& a, const char* k) {
  if (!a.contains(k) || a.at(k).is_null()) return std::nullopt;
  return decode_value(a.at(k));
}
Tensor opt_input(const Tensors& x, size_t i) { return x.size() > i ? x[i] : Tensor(); }

Tensors one(const Tensor& t) { return {t}; }

// ---- op name -> call of our API with the fixture's attrs ----
const std::map<std::string, OpFn>& op_table() {
  static const std::map<std::string, OpFn> table = [] {
    std::map<std::string, OpFn> m;
    // the pointwise tables' ops, each called by its name: an op added to a .def table is covered
    // here without a line, and the walk below fails until the fixtures have its cases
    using U = Tensor (*)(const Tensor&);
    using B = Tensor (*)(const Tensor&, const Tensor&);
    auto unary = [&m](const char* name, U f) { m[name] = [f](const Tensors& x, const json&) { return one(f(x[0])); }; };
    auto binary = [&m](const char* name, B f) {
      m[name] = [f](const Tensors& x, const json&) { return one(f(x[0], x[1])); };
    };
#define TR_UNARY_OP(name, ...) unary(#name, tr::name);
#define TR_UNARY_OP_OWN_API(...)  // written below, with their attributes
#include "ops/unary_ops.def"
#define TR_BINARY_OP(name, ...) binary(#name, tr::name);
#define TR_BINARY_OP_OWN_API(...)
#include "ops/binary_ops.def"
#define TR_COMPARE_OP(name, ...) binary(#name, tr::name);
#include "ops/compare_ops.def"
#define TR_PREDICATE_OP(name, ...) unary(#name, tr::name);
#include "ops/predicate_ops.def"
    // the table ops with attributes, and the rest of ops.h's pointwise API
    m["add"] = [](const Tensors& x, const json& a) { return one(add(x[0], x[1], f64(a, "alpha", 1.0))); };
    m["sub"] = [](const Tensors& x, const json& a) { return one(sub(x[0], x[1], f64(a, "alpha", 1.0))); };
    m["div"] = [](const Tensors& x, const json&) { return one(div(x[0], x[1])); };
    m["pow"] = [](const Tensors& x, const json& a) {
      std::string v = a.value("variant", "tensor_tensor");
      if (v == "tensor_scalar") return one(pow(x[0], f64(a, "exponent", 0.0)));
      if (v == "scalar_tensor") return one(pow(f64(a, "base", 0.0), x[0]));
      return one(pow(x[0], x[1]));
    };
    m["where"] = [](const Tensors& x, const json&) { return one(where(x[0], x[1], x[2])); };
    m["logical_and"] = [](const Tensors& x, const json&) { return one(logical_and(x[0], x[1])); };
    m["gelu"] = [](const Tensors& x, const json& a) { return one(gelu(x[0], a.at("approximate").get<std::string>())); };
    m["softplus"] = [](const Tensors& x, const json& a) {
      return one(softplus(x[0], f64(a, "beta", 1.0), f64(a, "threshold", 20.0)));
    };
    m["clamp"] = [](const Tensors& x, const json& a) { return one(clamp(x[0], opt_f64(a, "min"), opt_f64(a, "max"))); };
    m["cast"] = [](const Tensors& x, const json& a) {
      return one(cast(x[0], dtype_from_name(a.at("to").get<std::string>())));
    };
    // reductions
    m["sum"] = [](const Tensors& x, const json& a) { return one(sum(x[0], ints(a, "dims"), flag(a, "keepdim"))); };
    m["mean"] = [](const Tensors& x, const json& a) { return one(mean(x[0], ints(a, "dims"), flag(a, "keepdim"))); };
    m["var"] = [](const Tensors& x, const json& a) {
      return one(var(x[0], ints(a, "dims"), f64(a, "correction", 1.0), flag(a, "keepdim")));
    };
    m["std"] = [](const Tensors& x, const json& a) {
      return one(tr::std(x[0], ints(a, "dims"), f64(a, "correction", 1.0), flag(a, "keepdim")));
    };
    m["amax"] = [](const Tensors& x, const json& a) { return one(amax(x[0], ints(a, "dims"), flag(a, "keepdim"))); };
    m["amin"] = [](const Tensors& x, const json& a) { return one(amin(x[0], ints(a, "dims"), flag(a, "keepdim"))); };
    m["max"] = [](const Tensors& x, const json& a) -> Tensors {
      if (a.at("variant") == "all") return {max(x[0])};
      auto r = max(x[0], i64(a, "dim"), flag(a, "keepdim"));
      return {r.values, r.indices};
    };
    m["min"] = [](const Tensors& x, const json& a) -> Tensors {
      if (a.at("variant") == "all") return {min(x[0])};
      auto r = min(x[0], i64(a, "dim"), flag(a, "keepdim"));
      return {r.values, r.indices};
    };
    m["argmax"] = [](const Tensors& x, const json& a) {
      return one(argmax(x[0], opt_i64(a, "dim"), flag(a, "keepdim")));
    };
    m["argmin"] = [](const Tensors& x, const json& a) {
      return one(argmin(x[0], opt_i64(a, "dim"), flag(a, "keepdim")));
    };
    m["norm"] = [](const Tensors& x, const json& a) {
      return one(norm(x[0], f64(a, "p", 2.0), ints(a, "dims"), flag(a, "keepdim")));
    };
    m["sum_to"] = [](const Tensors& x, const json& a) { return one(sum_to(x[0], ints(a, "shape"))); };
    // linear algebra
    m["mm"] = [](const Tensors& x, const json&) { return one(mm(x[0], x[1])); };
    m["bmm"] = [](const Tensors& x, const json&) { return one(bmm(x[0], x[1])); };
    m["matmul"] = [](const Tensors& x, const json&) { return one(matmul(x[0], x[1])); };
    m["linear"] = [](const Tensors& x, const json&) { return one(linear(x[0], x[1], opt_input(x, 2))); };
    // softmax family
    m["softmax"] = [](const Tensors& x, const json& a) { return one(softmax(x[0], i64(a, "dim"))); };
    m["log_softmax"] = [](const Tensors& x, const json& a) { return one(log_softmax(x[0], i64(a, "dim"))); };
    m["layer_norm"] = [](const Tensors& x, const json& a) {
      return one(layer_norm(x[0], ints(a, "normalized_shape"), opt_input(x, 1), opt_input(x, 2), f64(a, "eps", 1e-5)));
    };
    // shape / views
    m["view"] = [](const Tensors& x, const json& a) { return one(view(x[0], ints(a, "shape"))); };
    m["reshape"] = [](const Tensors& x, const json& a) { return one(reshape(x[0], ints(a, "shape"))); };
    m["transpose"] = [](const Tensors& x, const json& a) {
      return one(transpose(x[0], i64(a, "dim0"), i64(a, "dim1")));
    };
    m["permute"] = [](const Tensors& x, const json& a) { return one(permute(x[0], ints(a, "dims"))); };
    m["narrow"] = [](const Tensors& x, const json& a) {
      return one(narrow(x[0], i64(a, "dim"), i64(a, "start"), i64(a, "length")));
    };
    m["slice"] = [](const Tensors& x, const json& a) {
      return one(slice(x[0], i64(a, "dim"), i64(a, "start"), i64(a, "end"), i64(a, "step")));
    };
    m["select"] = [](const Tensors& x, const json& a) { return one(select(x[0], i64(a, "dim"), i64(a, "index"))); };
    m["unsqueeze"] = [](const Tensors& x, const json& a) { return one(unsqueeze(x[0], i64(a, "dim"))); };
    m["squeeze"] = [](const Tensors& x, const json& a) { return one(squeeze(x[0], opt_i64(a, "dim"))); };
    m["expand"] = [](const Tensors& x, const json& a) { return one(expand(x[0], ints(a, "shape"))); };
    m["flatten"] = [](const Tensors& x, const json& a) { return one(flatten(x[0], i64(a, "start"), i64(a, "end"))); };
    m["contiguous"] = [](const Tensors& x, const json&) { return one(contiguous(x[0])); };
    m["clone"] = [](const Tensors& x, const json&) { return one(clone(x[0])); };
    m["unbind"] = [](const Tensors& x, const json& a) { return unbind(x[0], i64(a, "dim")); };
    m["cat"] = [](const Tensors& x, const json& a) { return one(cat(x, i64(a, "dim"))); };
    m["stack"] = [](const Tensors& x, const json& a) { return one(stack(x, i64(a, "dim"))); };
    // indexing
    m["index_select"] = [](const Tensors& x, const json& a) { return one(index_select(x[0], i64(a, "dim"), x[1])); };
    m["index_add"] = [](const Tensors& x, const json& a) { return one(index_add(x[0], i64(a, "dim"), x[1], x[2])); };
    m["gather"] = [](const Tensors& x, const json& a) { return one(gather(x[0], i64(a, "dim"), x[1])); };
    m["scatter_add"] = [](const Tensors& x, const json& a) {
      return one(scatter_add(x[0], i64(a, "dim"), x[1], x[2]));
    };
    m["embedding"] = [](const Tensors& x, const json&) { return one(embedding(x[0], x[1])); };
    m["one_hot"] = [](const Tensors& x, const json& a) { return one(one_hot(x[0], i64(a, "num_classes"))); };
    // convolution and pooling
    m["conv2d"] = [](const Tensors& x, const json& a) {
      return one(conv2d(x[0], x[1], opt_input(x, 2), ints(a, "stride"), ints(a, "padding"), ints(a, "dilation"),
                        i64(a, "groups")));
    };
    m["max_pool2d"] = [](const Tensors& x, const json& a) {
      return one(max_pool2d(x[0], ints(a, "kernel"), ints(a, "stride"), ints(a, "padding"), ints(a, "dilation")));
    };
    m["avg_pool2d"] = [](const Tensors& x, const json& a) {
      return one(avg_pool2d(x[0], ints(a, "kernel"), ints(a, "stride"), ints(a, "padding"),
                            flag(a, "count_include_pad", true)));
    };
    // losses
    m["cross_entropy"] = [](const Tensors& x, const json&) { return one(cross_entropy(x[0], x[1])); };
    m["mse_loss"] = [](const Tensors& x, const json&) { return one(mse_loss(x[0], x[1])); };
    return m;
  }();
  return table;
}

const json& fixtures() { return fixture_json("op_fixtures.json"); }

std::string known_ops() {
  std::string s;
  for (auto& [k, v] : op_table()) s += (s.empty() ? "" : ", ") + k;
  return s;
}

// Runs one fixture case with its inputs on `dev`; returns the mismatches (empty when it passes).
std::vector<std::string> run_case(const json& c, Device dev = kCPU) {
  const std::string op = c.at("op");
  auto it = op_table().find(op);
  if (it == op_table().end()) return {"unknown op '" + op + "' (known: " + known_ops() + ")"};
  const json& attrs = c.at("attrs");
  const json& grads = c.at("grads");
  double rtol = c.at("rtol"), atol = c.at("atol");

  Tensors leaves;
  for (size_t i = 0; i < c.at("inputs").size(); ++i) {
    Tensor t = decode(c.at("inputs")[i]).to(dev);
    if (!grads.is_null() && !grads[i].is_null()) t.requires_grad_(true);
    leaves.push_back(t);
  }
  Tensors xs = leaves;
  if (attrs.contains("pre_transpose")) {
    Shape d = ints(attrs, "pre_transpose");
    xs[0] = transpose(xs[0], d[0], d[1]);
  }

  std::vector<std::string> bad;
  Tensors outs = it->second(xs, attrs);
  const json& want = c.at("outputs");
  if (outs.size() != want.size())
    return {"ours returns " + std::to_string(outs.size()) + " outputs, torch " + std::to_string(want.size())};
  for (size_t k = 0; k < outs.size(); ++k) {
    if (outs[k].defined() && outs[k].device() != dev)
      bad.push_back("output " + std::to_string(k) + " is on " + outs[k].device().str() + ", its inputs on " +
                    dev.str());
    std::string m = compare(outs[k], want[k], rtol, atol);
    if (!m.empty()) bad.push_back("output " + std::to_string(k) + ": " + m);
  }
  if (grads.is_null()) return bad;

  Tensor loss;
  for (size_t k = 0; k < outs.size(); ++k) {
    const json& w = c.at("grad_weights")[k];
    if (w.is_null()) continue;
    Tensor term = sum(mul(outs[k], decode(w).to(outs[k].device())));
    loss = loss.defined() ? add(loss, term) : term;
  }
  Tensors req;
  std::vector<size_t> req_idx;
  for (size_t i = 0; i < leaves.size(); ++i)
    if (!grads[i].is_null()) {
      req.push_back(leaves[i]);
      req_idx.push_back(i);
    }
  Tensors gs = autograd::grad({loss}, req, {}, {}, false, /*allow_unused=*/true);
  for (size_t j = 0; j < gs.size(); ++j) {
    size_t i = req_idx[j];
    Tensor g = gs[j].defined() ? gs[j] : zeros_like(leaves[i]);
    if (g.device() != dev) bad.push_back("grad of input " + std::to_string(i) + " is on " + g.device().str());
    std::string m = compare(g, grads[i], rtol, atol);
    if (!m.empty()) bad.push_back("grad of input " + std::to_string(i) + ": " + m);
  }
  return bad;
}

std::string case_name(const json& c) {
  return c.at("op").get<std::string>() + " / " + c.at("case").get<std::string>() + " / " +
         c.at("dtype").get<std::string>();
}

}  // namespace

namespace {
// Every fixture case with its inputs on `dev`: one check each, and a count in the log.
void check_fixtures(Device dev) {
  const json& all = fixtures();
  REQUIRE(all.size() > 0);
  int passed = 0, failed = 0;
  for (auto& c : all) {
    std::vector<std::string> bad;
    try {
      bad = run_case(c, dev);
    } catch (const std::exception& e) { bad.push_back(std::string("threw: ") + e.what()); }
    std::string why;
    for (auto& b : bad) why += "\n  " + b;
    if (c.contains("tol_note")) why += "\n  (loosened tolerance: " + c.at("tol_note").get<std::string>() + ")";
    INFO(case_name(c) << " on " << dev.str() << why);
    CHECK(bad.empty());
    (bad.empty() ? passed : failed)++;
  }
  WARN("fixtures on " << dev.str() << ": " << all.size() << " cases: " << passed << " passed, " << failed << " failed");
}
}  // namespace

TEST_CASE("op forward values and gradients equal the PyTorch fixtures", "[fixtures]") { check_fixtures(kCPU); }

TEST_CASE("op forward values and gradients on CUDA equal the PyTorch fixtures", "[fixtures][gpu]") {
  TR_REQUIRE_GPU();
  check_fixtures(Device(DeviceType::CUDA, 0));
}

TEST_CASE("the fixtures cover every op of ops.h in float64 and float32", "[fixtures]") {
  std::map<std::string, std::set<std::string>> dtypes;
  for (auto& c : fixtures()) dtypes[c.at("op")].insert(c.at("dtype").get<std::string>());
  for (auto& [op, fn] : op_table()) {
    INFO("op: " << op);
    REQUIRE(dtypes.count(op) == 1);
    if (op == "one_hot") continue;  // integer indices only
    CHECK(dtypes[op].count("float64") == 1);
    CHECK(dtypes[op].count("float32") == 1);
  }
  for (auto& [op, d] : dtypes) {
    INFO("fixture op without a dispatch entry: " << op << " (known: " << known_ops() << ")");
    CHECK(op_table().count(op) == 1);
  }
}

// ---- random ops: statistics, not values (our Philox streams differ from torch's generator) ----

namespace {
double mean_of(const Tensor& t) { return mean(cast(t, DType::F64)).item(); }
double std_of(const Tensor& t) { return tr::std(cast(t, DType::F64)).item(); }
}  // namespace

TEST_CASE("rand and randn have the right moments on 100k samples", "[fixtures][random]") {
  for (DType dt : {DType::F32, DType::F64}) {
    INFO("dtype " << dtype_name(dt));
    Generator g(1234);
    Tensor u = rand({100000}, dt, &g);
    CHECK(u.dtype() == dt);
    CHECK(min(u).item() >= 0.0);
    CHECK(max(u).item() < 1.0);
    // mean 1/2, std 1/sqrt(12); the standard error of the mean is ~0.0009
    CHECK(std::abs(mean_of(u) - 0.5) < 0.005);
    CHECK(std::abs(std_of(u) - 0.28867513) < 0.005);
    Tensor n = randn({100000}, dt, &g);
    CHECK(std::abs(mean_of(n)) < 0.015);
    CHECK(std::abs(std_of(n) - 1.0) < 0.015);
    // P(|z| < 1) = 0.6827
    CHECK(std::abs(mean_of(lt(abs(n), wrap_scalar(1.0, dt))) - 0.682689) < 0.01);
  }
}

TEST_CASE("randint and randperm cover their ranges", "[fixtures][random]") {
  Generator g(99);
  Tensor r = randint(3, 10, {70000}, DType::I64, &g);
  CHECK(r.dtype() == DType::I64);
  CHECK(min(r).item() == 3.0);
  CHECK(max(r).item() == 9.0);
  for (int v = 3; v < 10; ++v) {
    INFO("value " << v);
    CHECK(std::abs(mean_of(eq(r, full({}, double(v), DType::I64))) - 1.0 / 7.0) < 0.01);
  }
  Tensor p = randperm(1000, &g);
  std::vector<double> v = p.tolist();
  std::sort(v.begin(), v.end());
  for (size_t i = 0; i < v.size(); ++i) REQUIRE(v[i] == double(i));
  CHECK(p.tolist() != v);  // shuffled
}

TEST_CASE("dropout keeps 1-p of the values, scaled by 1/(1-p)", "[fixtures][random]") {
  for (double p : {0.1, 0.3, 0.5}) {
    for (DType dt : {DType::F32, DType::F64}) {
      INFO("p " << p << " dtype " << dtype_name(dt));
      Generator g(7);
      Tensor x = ones({100000}, dt);
      Tensor m = dropout_mask(x, p, &g);
      CHECK(m.dtype() == dt);
      double scale = dt == DType::F32 ? double(float(1.0 / (1.0 - p))) : 1.0 / (1.0 - p);
      int64_t kept = 0, other = 0;
      for (double e : m.tolist()) {
        if (e == 0.0) continue;
        if (std::abs(e - scale) <= 1e-6 * scale)
          ++kept;
        else
          ++other;
      }
      CHECK(other == 0);
      CHECK(std::abs(double(kept) / 1e5 - (1.0 - p)) < 0.01);
      Generator g2(7);
      Tensor y = dropout(x * 2.0, p, true, &g2);
      CHECK(allclose(y, m * 2.0, 1e-6, 0.0));  // same seed: the same mask
      CHECK(equal(dropout(x, p, false, &g2), x));
      CHECK(equal(dropout(x, 0.0, true, &g2), x));
    }
  }
}

TEST_CASE("the same seed gives the same numbers, another seed or a later draw others", "[fixtures][random]") {
  Generator a(42), b(42), c(43);
  Tensor ra = randn({1000}, DType::F64, &a), rb = randn({1000}, DType::F64, &b), rc = randn({1000}, DType::F64, &c);
  CHECK(equal(ra, rb));
  CHECK_FALSE(equal(ra, rc));
  CHECK_FALSE(equal(ra, randn({1000}, DType::F64, &a)));
  CHECK(equal(rand({50}, DType::F32, &a), rand({50}, DType::F32, &b)) == false);  // a and b are at different offsets
  b.set_state(a.get_state());
  CHECK(equal(rand({50}, DType::F32, &a), rand({50}, DType::F32, &b)));
  manual_seed(5);
  Tensor d1 = rand({100});
  manual_seed(5);
  CHECK(equal(d1, rand({100})));
  Generator m1(11), m2(11);
  CHECK(equal(dropout_mask(ones({500}), 0.4, &m1), dropout_mask(ones({500}), 0.4, &m2)));
}

}  // namespace test_op_fixtures
