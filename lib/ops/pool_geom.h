// The window geometry of a pooling op's attrs (kernel, stride, padding, dilation when present) for
// input x [N, C, H, W] and output y [N, C, OH, OW]: what the CPU and CUDA pooling kernels take; and
// the output shape it gives.
#pragma once
#include "core/tensor.h"
#include "ops/attrs.h"
#include "ops/pool_math.h"

namespace tr {

pool::Geom pool_geom(const Shape& x, const Shape& y, const Attrs& a);

// The output shape [N, C, OH, OW] of pooling x with the window of a (floor, torch's
// ceil_mode=False); errors name `op`.
Shape pool_out_shape(const char* op, const Shape& x, const Attrs& a);

}  // namespace tr
