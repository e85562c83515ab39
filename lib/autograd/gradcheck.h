// gradcheck / gradgradcheck: compare autograd's Jacobian-vector products with central finite
// differences, in f64 (torch.autograd.gradcheck semantics: eps 1e-6, atol 1e-5, rtol 1e-3).
#pragma once
#include <functional>
#include <string>
#include <vector>
#include "core/tensor.h"

namespace tr {

using TensorFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // the first mismatch: input, element, analytical vs numerical
  explicit operator bool() const { return ok; }
};

// Checks d fn / d inputs for every input with requires_grad (all f64).
GradcheckResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions opt = {});
// Checks the second derivative: the gradient of <grad_outputs, d fn/d inputs> w.r.t. inputs and
// grad_outputs (random, seeded) via gradcheck of the create_graph backward.
GradcheckResult gradgradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions opt = {});

}  // namespace tr
