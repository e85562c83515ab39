// Process-wide switches, torch.backends' globals: how cuDNN picks its convolution algorithms,
// whether f32 products may run in TF32 on tensor cores, and whether fused kernels replace composite
// chains. Set once by the run setup from [run] before the first op; read by the kernels' callers.
#pragma once
#include <cstdint>
#include <string>
#include "core/device.h"

namespace tr::backends {

struct Cudnn {
  bool benchmark = false;      // time every algorithm once per geometry (cudnnFind*) instead of heuristics
  bool deterministic = false;  // only algorithms whose results do not depend on scheduling
  bool allow_tf32 = true;      // torch.backends.cudnn.allow_tf32 (default true)
};
struct Matmul {
  bool allow_tf32 = false;  // torch.backends.cuda.matmul.allow_tf32 (default false)
};
// Which path attention_qkvpacked takes ([run] attention): Auto is the fastest one measured on the
// device type (fused_attention says which).
enum class AttentionPath : uint8_t { Auto, Fused, Composite };
// Fused kernels that replace a chain of composite ops with the same math (gelu_backward,
// softmax_backward, ...): false runs the composite chain, the fused op's spec, e.g. to check
// that a fusion changes no result beyond rounding. `attention` picks attention's path among them.
struct Fusion {
  bool enabled = true;
  AttentionPath attention = AttentionPath::Auto;
};

Cudnn& cudnn();
Matmul& matmul();
Fusion& fusion();

// Whether attention_qkvpacked runs its fused kernel on device type d (where it has one): never
// with fusion off, else as fusion().attention says.
bool fused_attention(DeviceType d);
// [run] attention's values: "auto", "fused", "composite".
AttentionPath attention_path(const std::string& name);

}  // namespace tr::backends
