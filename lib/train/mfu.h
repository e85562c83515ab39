// Model FLOP utilisation (MFU): the FLOPs of a training step's matrix products and convolutions
// (counted on the run's first step, ops/flop_counter.h) per second, as a fraction of the peak this
// device measures for a large matrix product in the step's compute dtype at the run's thread count.
#pragma once
#include "core/device.h"
#include "core/dtype.h"

namespace tr::train {

// FLOP/s of the best of 3 products of two n x n matrices (after one warm-up) of dtype `t` on `d`:
// n = 1024 on the CPU (~10 ms each at 200 GFLOP/s), 4096 on a GPU.
double measure_matmul_peak(Device d, DType t);

}  // namespace tr::train
