// Tensor printing in torch's repr format: values, dtype, device, and grad_fn or requires_grad
// (which is why printing sits on the autograd floor). Tensor::str() gives the same text.
#pragma once
#include <ostream>
#include "core/tensor.h"

namespace tr {

// Print precision (torch.set_printoptions(precision=...)).
void set_print_precision(int digits);
int print_precision();
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace tr
