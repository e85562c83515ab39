// The tensor-core FlashAttention-2 kernels of attention_qkvpacked for f16 and bf16
// (attention_mma_kernels.cu), called by the entry points of attention_kernels.cu: qkv, y, dy and
// dqkv of dtype `t`, lse and delta (D_i = dy_i . y_i, computed by the caller) f32.
#pragma once
#include "core/dtype.h"
#include "ops/attention_math.h"

namespace tr::cuda {

void launch_attention_mma(DType t, const attn::Geometry& g, const void* qkv, void* y, void* lse);
void launch_attention_mma_backward(DType t, const attn::Geometry& g, const void* dy, const void* qkv, const void* lse,
                                   const void* delta, void* dqkv);

}  // namespace tr::cuda
