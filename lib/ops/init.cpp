#include "ops/init.h"
#include <cmath>
#include "core/grad_mode.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::init {

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  TR_CHECK(t.dim() >= 2, "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions (shape ",
           t.sizes(), ")");
  int64_t receptive = 1;
  for (int64_t i = 2; i < t.dim(); ++i) receptive *= t.size(i);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(const std::string& nl, double param) {
  if (nl == "linear" || nl == "identity" || nl == "sigmoid" || nl.rfind("conv", 0) == 0) return 1.0;
  if (nl == "tanh") return 5.0 / 3.0;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nl == "selu") return 3.0 / 4.0;
  throw Error(str("calculate_gain: unsupported nonlinearity '", nl,
                  "' (known: linear, conv1d, conv2d, sigmoid, tanh, relu, leaky_relu, selu)"));
}

namespace {
Attrs stream(Generator* g, int64_t n, Attrs a) {
  GeneratorState s = (g ? *g : default_generator()).reserve(uint64_t(n));
  a.set("seed", int64_t(s.seed));
  a.set("offset", int64_t(s.offset));
  return a;
}
void bump(Tensor& t) { t.impl()->storage->bump_version(); }
}  // namespace

Tensor& uniform_(Tensor& t, double a, double b, Generator* gen) {
  NoGradGuard ng;
  dispatch("uniform_", {t}, stream(gen, t.numel(), {{"low", a}, {"high", b}}));
  bump(t);
  return t;
}
Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  NoGradGuard ng;
  dispatch("normal_", {t}, stream(gen, t.numel(), {{"mean", mean}, {"std", std}}));
  bump(t);
  return t;
}
Tensor& constant_(Tensor& t, double v) {
  NoGradGuard ng;
  t.fill_(v);
  return t;
}
Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

static double kaiming_std(const Tensor& t, double a, const std::string& mode, const std::string& nl) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  TR_CHECK(mode == "fan_in" || mode == "fan_out", "kaiming init: mode must be 'fan_in' or 'fan_out', got '", mode, "'");
  int64_t fan = mode == "fan_in" ? fan_in : fan_out;
  return calculate_gain(nl, a) / std::sqrt(double(fan));
}
Tensor& kaiming_uniform_(Tensor& t, double a, Generator* gen, const std::string& mode, const std::string& nl) {
  double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nl);
  return uniform_(t, -bound, bound, gen);
}
Tensor& kaiming_normal_(Tensor& t, double a, Generator* gen, const std::string& mode, const std::string& nl) {
  return normal_(t, 0.0, kaiming_std(t, a, mode, nl), gen);
}
Tensor& xavier_uniform_(Tensor& t, double gain, Generator* gen) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  double a = gain * std::sqrt(6.0 / double(fan_in + fan_out));
  return uniform_(t, -a, a, gen);
}
Tensor& xavier_normal_(Tensor& t, double gain, Generator* gen) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  return normal_(t, 0.0, gain * std::sqrt(2.0 / double(fan_in + fan_out)), gen);
}

}  // namespace tr::init
