// The backward engine: an iterative walk over the graph in reverse order of creation.
#pragma once
#include <optional>
#include <vector>
#include "core/tensor.h"

namespace tr::autograd {

// Tensor.backward / torch.autograd.backward: accumulates into the .grad of leaves.
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              bool retain_graph = false, bool create_graph = false);

// torch.autograd.grad: returns d(outputs)/d(inputs) without touching any .grad.
// retain_graph defaults to create_graph. Unused inputs are an error unless allow_unused, when
// their gradient is an undefined Tensor.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, std::optional<bool> retain_graph = {},
                         bool create_graph = false, bool allow_unused = false);

}  // namespace tr::autograd
