// Many tensors cast to one dtype by one op: _fused_cast (tensors...; dtype) -> casts..., one
// multi-tensor launch on CUDA instead of one per tensor. Differentiable: its backward casts the
// gradients back with the same op. Autocast's parameter casts use it (amp::precast_parameters):
// a GPT-2 step casts every weight and bias to bf16 in one launch, and their gradients back in one.
#pragma once
#include <vector>
#include "core/tensor.h"

namespace tr {

// Each tensor of `tensors` (floating, on one device) cast to `dtype`, as cast() would.
std::vector<Tensor> fused_cast(const std::vector<Tensor>& tensors, DType dtype);

}  // namespace tr
