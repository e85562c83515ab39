// The window geometry of a pooling op's attrs (kernel, stride, padding, dilation when present) for
// input x [N, C, H, W] and output y [N, C, OH, OW]: what the CPU and CUDA pooling kernels take.
#pragma once
#include "core/tensor.h"
#include "ops/attrs.h"
#include "ops/pool_math.h"

namespace tr {

pool::Geom pool_geom(const Shape& x, const Shape& y, const Attrs& a);

}  // namespace tr
