// f32 and bf16 2-D convolutions through oneDNN's convolution primitives: its JIT direct kernels, which run
// in blocked layouts (nChw16c), with the NCHW tensors reordered in and out around each call; what
// torch runs on the CPU. On a Zen 5 (2 threads) they reached 400-480 GFLOP/s on the convolutions of
// fmnist_cnn and fmnist_resnet (reorders not counted), against 240-290 for im2col + sgemm.
// Each returns false, computing nothing, where oneDNN has no JIT kernel for the geometry (it
// would fall back to its own im2col + gemm, slower than ours) or cannot express it; the caller
// then runs the im2col kernels. TR_CONV=onednn|im2col picks (default onednn), fixed per process.
// Primitives are built once per geometry and cached; results are run-to-run deterministic at a
// given thread count.
#pragma once
#include "core/dtype.h"
#include "ops/cpu/conv_geom.h"

namespace tr::cpu {

bool onednn_conv_enabled();

// Every tensor of a call has dtype t (f32, or bf16 where use_avx512_bf16(): its bf16
// kernels accumulate in f32 and round each output once).
// y = conv(x, w) + b (b may be null); x, w, y contiguous NCHW / OIHW. Not for fewer than 16 input
// channels (a stem), where the output's reorder costs more than the kernel saves.
bool onednn_conv2d_forward(const ConvGeom& g, DType t, const void* x, const void* w, const void* b, void* y);
// gx = the gradient of conv(x, w) by x, from gy.
bool onednn_conv2d_backward_input(const ConvGeom& g, DType t, const void* gy, const void* w, void* gx);
// gw = the gradient of conv(x, w) by w, from gy; and where gb is given, gb = the bias gradient (gy
// summed over N, OH, OW), in the same pass and in torch's order (its oneDNN convolution's diff_bias).
bool onednn_conv2d_backward_weight(const ConvGeom& g, DType t, const void* gy, const void* x, void* gw,
                                   void* gb = nullptr);

}  // namespace tr::cpu
