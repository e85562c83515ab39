// Whole-tensor comparisons for tests and checks: allclose (torch.allclose, NaN == NaN) and equal.
#include <cmath>
#include "ops/ops.h"

namespace tr {

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.sizes() != b.sizes()) return false;
  auto x = a.tolist(), y = b.tolist();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (!(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]))) return false;
  }
  return true;
}

bool equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  return a.tolist() == b.tolist();
}

}  // namespace tr
