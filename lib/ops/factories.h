// Tensors filled with values (torch.zeros, ones, full, tensor, arange, linspace): allocation
// (core's empty) plus a fill or a copy, which are ops, so they live here.
#pragma once
#include <initializer_list>
#include <vector>
#include "core/tensor.h"

namespace tr {

Tensor zeros(const Shape& shape, TensorOptions opts = {});
Tensor ones(const Shape& shape, TensorOptions opts = {});
Tensor full(const Shape& shape, double value, TensorOptions opts = {});
Tensor scalar_tensor(double value, TensorOptions opts = {});
Tensor arange(double start, double end, double step = 1.0, TensorOptions opts = {DType::I64});
Tensor arange(int64_t end, TensorOptions opts = {DType::I64});
Tensor linspace(double start, double end, int64_t steps, TensorOptions opts = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double v);
// From host values (converted to opts.dtype) with a shape; numel must match.
Tensor from_vector(const std::vector<double>& values, const Shape& shape, TensorOptions opts = {});
Tensor tensor(std::initializer_list<double> values, TensorOptions opts = {});
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, TensorOptions opts = {});

}  // namespace tr
