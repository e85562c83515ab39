#include "op_cases.h"

namespace tr::test {

std::vector<OpCase>& op_cases() {
  static std::vector<OpCase> cases;
  return cases;
}

Tensor randn64(const Shape& s, uint64_t seed, bool requires_grad) {
  Generator g(seed);
  Tensor t = randn(s, DType::F64, &g);
  if (requires_grad) t.requires_grad_(true);
  return t;
}

Tensor uniform64(const Shape& s, double lo, double hi, uint64_t seed, bool requires_grad) {
  Generator g(seed);
  Tensor t = rand(s, DType::F64, &g) * (hi - lo) + lo;
  t = t.detach();
  if (requires_grad) t.requires_grad_(true);
  return t;
}

}  // namespace tr::test
