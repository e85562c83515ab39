// Tensor printing in torch's repr format. (Placeholder formatting; replaced by the full formatter.)
#include <iomanip>
#include <ostream>
#include "core/tensor.h"

namespace tr {

namespace {
int g_precision = 4;
}

void set_print_precision(int digits) { g_precision = digits; }
int print_precision() { return g_precision; }

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  auto v = t.tolist();
  os << "tensor([";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << std::fixed << std::setprecision(g_precision) << v[i];
  return os << "])";
}

}  // namespace tr
