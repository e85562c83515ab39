// The Loss base module: two inputs (input, target) and a checked reduction.
#include "nn/loss.h"

namespace tr::nn {

Loss::Loss(std::string type_name, std::string red) : Module(std::move(type_name)), reduction(std::move(red)) {
  TR_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none", this->type_name(), ": reduction is '",
           reduction, "', expected one of 'mean', 'sum', 'none'");
}

Tensor Loss::forward(const std::vector<Tensor>& xs) {
  TR_CHECK(xs.size() == 2, type_name(), ": expected 2 inputs (input, target), got ", xs.size());
  return forward(xs[0], xs[1]);
}

}  // namespace tr::nn
