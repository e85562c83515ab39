// Printing: each case of tests/fixtures/print_cases.json (written by generators/make_print_fixtures.py with torch
// 1.13) is rebuilt here and operator<< must reproduce torch's repr exactly.
#include <catch2/catch.hpp>
#include "unit/require_gpu.h"
#include "autograd/print.h"
#include "unit/fixtures.h"
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include "core/cuda_hooks.h"
#include "ops/ops.h"

namespace test_print {

using namespace tr;
using json = nlohmann::json;

namespace {

const json& print_cases() { return fixture_json("print_cases.json").at("cases"); }

double decode_value(const json& v) {
  if (v.is_number()) return v.get<double>();
  std::string s = v.get<std::string>();
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (s == "inf") return INFINITY;
  if (s == "-inf") return -INFINITY;
  if (s == "-0") return -0.0;
  throw std::runtime_error("print_cases.json: unknown value '" + s + "'");
}

// Mirrors build() in make_print_fixtures.py: float64 values -> dtype -> shape -> requires_grad -> op.
Tensor build_case(const json& c) {
  DType dt = dtype_from_name(c.at("dtype").get<std::string>());
  Tensor x;
  if (!c.at("arange").is_null()) {
    auto a = c.at("arange");
    x = arange(a[0].get<double>(), a[1].get<double>(), a[2].get<double>(), DType::F64);
  } else {
    std::vector<double> values;
    for (const auto& v : c.at("values")) values.push_back(decode_value(v));
    x = from_vector(values, {int64_t(values.size())}, DType::F64);
  }
  x = x.to(dt).reshape(c.at("shape").get<Shape>());
  if (c.at("device").get<std::string>() == "cuda") x = x.to(Device("cuda"));
  if (c.at("requires_grad").get<bool>()) x.requires_grad_();
  std::string op = c.at("op").get<std::string>();
  if (op.empty()) return x;
  if (op == "mul2") return x * 2.0;
  if (op == "add_self") return x + x;
  if (op == "sum") return x.sum();
  if (op == "exp") return x.exp();
  if (op == "neg") return -x;
  if (op == "t") return x.t();
  throw std::runtime_error("print_cases.json: unknown op '" + op + "' (known: mul2, add_self, sum, exp, neg, t)");
}

struct PrecisionGuard {
  int saved = print_precision();
  ~PrecisionGuard() { set_print_precision(saved); }
};

// Builds the case, prints it at the case's precision and compares with torch's repr.
void check_case(const json& c) {
  INFO("case: " << c.at("name").get<std::string>());
  PrecisionGuard guard;
  set_print_precision(c.at("precision").get<int>());
  Tensor t = build_case(c);
  std::ostringstream os;
  os << t;
  CHECK(os.str() == c.at("repr").get<std::string>());
  CHECK(t.str() == os.str());
}

bool is_cuda_case(const json& c) { return c.at("device").get<std::string>() == "cuda"; }

}  // namespace

TEST_CASE("operator<< prints torch's repr for every fixture case", "[print]") {
  const json& cases = print_cases();
  REQUIRE(cases.size() >= 25);
  int checked = 0;
  for (const auto& c : cases) {
    if (is_cuda_case(c)) continue;  // [gpu] test below
    check_case(c);
    ++checked;
  }
  CHECK(checked >= 25);
}

TEST_CASE("CUDA tensors print with their device, as torch does", "[print][gpu]") {
  TR_REQUIRE_GPU();
  int checked = 0;
  for (const auto& c : print_cases()) {
    if (!is_cuda_case(c)) continue;
    check_case(c);
    ++checked;
  }
  CHECK(checked >= 3);
  CHECK(tensor({1.0, 2.5}).to(Device("cuda")).str() == "tensor([1.0000, 2.5000], device='cuda:0')");
}

TEST_CASE("print precision setting", "[print]") {
  PrecisionGuard guard;
  CHECK(print_precision() == 4);
  set_print_precision(2);
  CHECK(print_precision() == 2);
  CHECK(tensor({1.0 / 3.0}).str() == "tensor([0.33])");
  set_print_precision(4);
  CHECK(tensor({1.0 / 3.0}).str() == "tensor([0.3333])");
  CHECK_THROWS_AS(set_print_precision(-1), Error);
}

TEST_CASE("undefined tensor and printing does not change the tensor", "[print]") {
  std::ostringstream os;
  os << Tensor();
  CHECK(os.str() == "tensor(undefined)");
  Tensor x = arange(0.0, 6.0, 1.0, DType::F32).reshape({2, 3});
  uint64_t v = x.version();
  (void)x.str();
  CHECK(x.version() == v);
  CHECK(x.tolist() == std::vector<double>{0, 1, 2, 3, 4, 5});
}

}  // namespace test_print
