// The next-token distribution (nn/sampling.h) against closed forms on tiny vocabularies:
// greedy, temperature, top-k (HF's TopKLogitsWarper: ties with the k-th kept), top-p (HF's
// TopPLogitsWarper: the smallest most-likely set reaching p, at least one token), both together;
// draws follow the distribution and are reproducible by seed.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>
#include "core/rng.h"
#include "nn/sampling.h"
#include "unit/error_of.h"

namespace test_sampling {

using namespace tr;
using Catch::Matchers::Contains;
using tr::nn::SamplingOptions;
using tr::test::error_of;

namespace {

std::vector<double> softmax(const std::vector<double>& l) {
  double m = l[0], z = 0;
  for (double x : l) m = std::max(m, x);
  std::vector<double> p;
  for (double x : l) z += std::exp(x - m);
  for (double x : l) p.push_back(std::exp(x - m) / z);
  return p;
}

void check_probs(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("token " << i);
    CHECK(got[i] == Approx(want[i]).margin(1e-15));
  }
}

std::vector<double> logs(const std::vector<double>& p) {
  std::vector<double> l;
  for (double x : p) l.push_back(std::log(x));
  return l;
}

}  // namespace

TEST_CASE("sampling: greedy is the first most likely token (temperature 0 or top_k 1) and draws nothing",
          "[sampling]") {
  const std::vector<double> l = {0.5, 2.0, -1.0, 2.0, 1.0};
  for (SamplingOptions o : {SamplingOptions{0.0, 0, 1.0}, SamplingOptions{1.0, 1, 1.0}, SamplingOptions{0.0, 3, 0.5}}) {
    check_probs(nn::next_token_probs(l, o), {0, 1, 0, 0, 0});
    Generator g(3);
    CHECK(nn::sample_token(l, o, g) == 1);
    CHECK(g.get_state().offset == 0);
  }
}

TEST_CASE("sampling: temperature divides the logits before the softmax", "[sampling]") {
  const std::vector<double> l = {0.5, 2.0, -1.0, 1.0};
  check_probs(nn::next_token_probs(l, {1.0, 0, 1.0}), softmax(l));
  check_probs(nn::next_token_probs(l, {2.0, 0, 1.0}), softmax({0.25, 1.0, -0.5, 0.5}));
  check_probs(nn::next_token_probs(l, {0.5, 0, 1.0}), softmax({1.0, 4.0, -2.0, 2.0}));
}

TEST_CASE("sampling: top_k keeps the k largest logits (ties with the k-th too), renormalised", "[sampling]") {
  const std::vector<double> l = {1.0, 3.0, 2.0, 5.0, 4.0};
  const std::vector<double> two = softmax({5.0, 4.0});
  check_probs(nn::next_token_probs(l, {1.0, 2, 1.0}), {0, 0, 0, two[0], two[1]});
  const std::vector<double> three = softmax({1.5, 2.5, 2.0});  // with temperature 2: tokens 1, 3, 4
  check_probs(nn::next_token_probs(l, {2.0, 3, 1.0}), {0, three[0], 0, three[1], three[2]});
  check_probs(nn::next_token_probs(l, {1.0, 5, 1.0}), softmax(l));  // k >= V: all
  check_probs(nn::next_token_probs(l, {1.0, 9, 1.0}), softmax(l));
  const std::vector<double> tie = softmax({2.0, 2.0, 3.0});
  check_probs(nn::next_token_probs({2.0, 0.0, 2.0, 3.0}, {1.0, 2, 1.0}), {tie[0], 0, tie[1], tie[2]});
}

TEST_CASE("sampling: top_p keeps the smallest most likely set whose probability reaches p", "[sampling]") {
  const std::vector<double> l = logs({0.15, 0.5, 0.05, 0.3});  // sorted: 1 (0.5), 3 (0.3), 0 (0.15), 2 (0.05)
  check_probs(nn::next_token_probs(l, {1.0, 0, 0.45}), {0, 1, 0, 0});
  check_probs(nn::next_token_probs(l, {1.0, 0, 0.01}), {0, 1, 0, 0});  // always at least one
  check_probs(nn::next_token_probs(l, {1.0, 0, 0.7}), {0, 0.5 / 0.8, 0, 0.3 / 0.8});
  check_probs(nn::next_token_probs(l, {1.0, 0, 0.9}), {0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95});
  check_probs(nn::next_token_probs(l, {1.0, 0, 0.99}), {0.15, 0.5, 0.05, 0.3});
  check_probs(nn::next_token_probs(l, {1.0, 0, 1.0}), {0.15, 0.5, 0.05, 0.3});
  // after top_k, on the renormalised top-k set: {1, 3} is 0.625 / 0.375, so p = 0.6 keeps only 1
  check_probs(nn::next_token_probs(l, {1.0, 2, 0.6}), {0, 1, 0, 0});
  check_probs(nn::next_token_probs(l, {1.0, 2, 0.7}), {0, 0.625, 0, 0.375});
  // after temperature: 2 flattens to sqrt(p) / sum sqrt(p)
  double z = 0;
  for (double p : {0.15, 0.5, 0.05, 0.3}) z += std::sqrt(p);
  const double p1 = std::sqrt(0.5) / z, p3 = std::sqrt(0.3) / z;  // 0.37, 0.29: 0.66 < 0.7
  const double p0 = std::sqrt(0.15) / z;
  check_probs(nn::next_token_probs(l, {2.0, 0, 0.7}),
              {p0 / (p0 + p1 + p3), p1 / (p0 + p1 + p3), 0, p3 / (p0 + p1 + p3)});
}

TEST_CASE("sampling: draws follow the distribution, only inside the kept set, reproducible by seed", "[sampling]") {
  const std::vector<double> l = logs({0.15, 0.5, 0.05, 0.3});
  const SamplingOptions o{1.0, 0, 0.9};  // {1, 3, 0} renormalised by 0.95
  const std::vector<double> want = {0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95};
  Generator g(42);
  std::vector<int64_t> counts(4, 0), first;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const int64_t t = nn::sample_token(l, o, g);
    ++counts[size_t(t)];
    if (i < 50) first.push_back(t);
  }
  CHECK(counts[2] == 0);
  for (size_t i = 0; i < 4; ++i) {
    INFO("token " << i << ": " << counts[i] << " of " << n);
    CHECK(std::abs(double(counts[i]) / n - want[i]) < 0.01);  // 3.5 sigma at most
  }
  Generator same(42), other(43);
  std::vector<int64_t> again, diff;
  for (int i = 0; i < 50; ++i)
    again.push_back(nn::sample_token(l, o, same)), diff.push_back(nn::sample_token(l, o, other));
  CHECK(again == first);
  CHECK(diff != first);
}

TEST_CASE("sampling: bad options and non-finite logits are errors that name them", "[sampling]") {
  const std::vector<double> l = {1.0, 2.0};
  CHECK_THAT(error_of([&] { nn::next_token_probs(l, {-1.0, 0, 1.0}); }), Contains("temperature must be >= 0"));
  CHECK_THAT(error_of([&] { nn::next_token_probs(l, {1.0, -2, 1.0}); }), Contains("top_k must be >= 0"));
  CHECK_THAT(error_of([&] { nn::next_token_probs(l, {1.0, 0, 0.0}); }), Contains("top_p must be in (0, 1]"));
  CHECK_THAT(error_of([&] { nn::next_token_probs(l, {1.0, 0, 1.5}); }), Contains("top_p must be in (0, 1]"));
  CHECK_THAT(error_of([&] { nn::next_token_probs({1.0, NAN}, {1.0, 0, 1.0}); }), Contains("logit of token 1 is nan"));
  CHECK_THAT(error_of([&] { nn::next_token_probs({}, {1.0, 0, 1.0}); }), Contains("no logits"));
}

}  // namespace test_sampling
