// Process-wide switches of the CUDA libraries, torch.backends' globals: how cuDNN picks its
// convolution algorithms and whether f32 products may run in TF32 on tensor cores. Set once by
// the run setup from [run] before the first op; read by the CUDA launchers.
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

Cudnn& cudnn();
Matmul& matmul();

}  // namespace tr::backends
