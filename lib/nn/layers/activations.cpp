#include "nn/layers/activations.h"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include "nn/layer_registry.h"
#include "ops/ops.h"

namespace tr::nn {

std::string py_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  // shortest round-tripping digits d.ddd x 10^e
  char buf[40];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s(buf);
  size_t epos = s.find('e');
  int e = std::atoi(s.c_str() + epos + 1);
  std::string sign = v < 0 ? "-" : "";
  std::string digits;
  for (size_t i = sign.size(); i < epos; ++i) if (s[i] != '.') digits += s[i];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (e < -4 || e >= 16) {  // scientific, as Python's repr: 1e-05, 1.5e+20
    std::string m = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", e < 0 ? '-' : '+', std::abs(e));
    return sign + m + eb;
  }
  if (e < 0) return sign + "0." + std::string(size_t(-e - 1), '0') + digits;
  if (int(digits.size()) <= e + 1) return sign + digits + std::string(size_t(e + 1) - digits.size(), '0') + ".0";
  return sign + digits.substr(0, size_t(e + 1)) + "." + digits.substr(size_t(e + 1));
}

namespace {
// torch's defaults are ints (beta=1, threshold=20) and print without ".0"
std::string num_repr(double v) {
  return v == std::floor(v) && std::abs(v) < 1e15 ? std::to_string(int64_t(v)) : py_float(v);
}
}  // namespace

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

Tensor ReLU6::forward(const Tensor& x) {
  // clamp's backward passes the gradient at x = 0 and x = 6; hardtanh's does not
  Tensor y = clamp(x, 0.0, 6.0);
  return where(logical_and(x > 0.0, x < 6.0), y, y.detach());
}

GELU::GELU(std::string approx) : Module("GELU"), approximate(std::move(approx)) {
  TR_CHECK(approximate == "none" || approximate == "tanh", "GELU: approximate must be 'none' or 'tanh', got '",
           approximate, "'");
}
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate); }
std::string GELU::extra_repr() const { return "approximate='" + approximate + "'"; }

Tensor SiLU::forward(const Tensor& x) { return silu(x); }
Tensor Tanh::forward(const Tensor& x) { return tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }

Softplus::Softplus(double b, double thr) : Module("Softplus"), beta(b), threshold(thr) {
  TR_CHECK(beta != 0.0, "Softplus: beta must be non-zero");
}
Tensor Softplus::forward(const Tensor& x) { return softplus(x, beta, threshold); }
std::string Softplus::extra_repr() const { return str("beta=", num_repr(beta), ", threshold=", num_repr(threshold)); }

// Every activation keeps the shape; a float input is expected.
#define TR_ACTIVATION_LAYER(TYPE, DOC, MAKE)                                                             \
  TR_REGISTER_LAYER(TYPE, DOC, [](const TomlTable& t, ShapeInfo& io) -> ModulePtr {                     \
    if (!is_floating(io.dtype)) layer_error(t, str("expects a floating point input, got ", io.str())); \
    return MAKE;                                                                                         \
  })

TR_ACTIVATION_LAYER("relu", "(no keys)", std::make_shared<ReLU>());
TR_ACTIVATION_LAYER("relu6", "(no keys)", std::make_shared<ReLU6>());
TR_ACTIVATION_LAYER("gelu", "approximate = \"none\" | \"tanh\"",
                    std::make_shared<GELU>(t.get_choice("approximate", {"none", "tanh"}, "none")));
TR_ACTIVATION_LAYER("silu", "(no keys)", std::make_shared<SiLU>());
TR_ACTIVATION_LAYER("tanh", "(no keys)", std::make_shared<Tanh>());
TR_ACTIVATION_LAYER("sigmoid", "(no keys)", std::make_shared<Sigmoid>());
TR_ACTIVATION_LAYER("softplus", "beta = 1, threshold = 20", [&]() -> ModulePtr {
  double beta = t.get_float("beta", 1.0);
  if (beta == 0.0) t.fail("beta", "must be non-zero");
  return std::make_shared<Softplus>(beta, t.get_float("threshold", 20.0));
}());

}  // namespace tr::nn
