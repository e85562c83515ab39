// Process-wide switches, torch.backends' globals: how cuDNN picks its convolution algorithms,
// whether f32 products may run in TF32 on tensor cores, and whether fused kernels replace composite
// chains. Set once by the run setup from [run] before the first op; read by the kernels' callers.
#pragma once

namespace tr::backends {

struct Cudnn {
  bool benchmark = false;      // time every algorithm once per geometry (cudnnFind*) instead of heuristics
  bool deterministic = false;  // only algorithms whose results do not depend on scheduling
  bool allow_tf32 = true;      // torch.backends.cudnn.allow_tf32 (default true)
};
struct Matmul {
  bool allow_tf32 = false;  // torch.backends.cuda.matmul.allow_tf32 (default false)
};
// Fused kernels that replace a chain of composite ops with the same math (gelu_backward,
// softmax_backward, ...): false runs the composite chain, the fused op's spec, e.g. to check
// that a fusion changes no result beyond rounding.
struct Fusion {
  bool enabled = true;
};

Cudnn& cudnn();
Matmul& matmul();
Fusion& fusion();

}  // namespace tr::backends
