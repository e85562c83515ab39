#include "ops/backends.h"
#include "core/error.h"

namespace tr::backends {

Cudnn& cudnn() {
  static Cudnn c;
  return c;
}
Matmul& matmul() {
  static Matmul m;
  return m;
}
Fusion& fusion() {
  static Fusion f;
  return f;
}

bool fused_attention(DeviceType d) {
  const Fusion& f = fusion();
  if (!f.enabled) return false;
  switch (f.attention) {
    case AttentionPath::Fused:
      return true;
    case AttentionPath::Composite:
      return false;
    case AttentionPath::Auto:
      break;
  }
  // Auto: until a GPU has measured a path faster, the CUDA default is the path measured fastest.
  // An H200 ran GPT-2 124M at 57.7k tokens/s through the composite chain (cuBLAS batched GEMMs and
  // the softmax kernels) and under 1.5k through the old row-per-thread kernel; the FlashAttention-2
  // kernels (ops/cuda/attention_kernels.cu) have not been timed on a GPU yet. Once a lent GPU
  // measures them faster (bench/run_gpu_bench.sh gpt2 prints both), CUDA's auto flips to fused. On
  // the CPU the fused kernel is the faster (bench/README.md).
  return d != DeviceType::CUDA;
}

AttentionPath attention_path(const std::string& name) {
  if (name == "auto") return AttentionPath::Auto;
  if (name == "fused") return AttentionPath::Fused;
  if (name == "composite") return AttentionPath::Composite;
  throw Error(str("attention: '", name, "' is not one of auto, fused, composite"));
}

}  // namespace tr::backends
