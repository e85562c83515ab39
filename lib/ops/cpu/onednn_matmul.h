// Matrix products through oneDNN's matmul primitive (its brgemm JIT kernels): what torch runs for
// CPU bf16 autocast. On a Zen 5 (AVX512_BF16, 2 threads) its bf16 products ran at 620-950 GFLOP/s
// over gpt_char's and fmnist_mlp's shapes, twice the f32 rate. A primitive is built once per
// geometry (dtypes, sizes, strides) and cached; each call brings its own scratchpad, so calls may
// run concurrently (bmm's per-thread batches).
#pragma once
#include <cstdint>
#include "core/dtype.h"

namespace tr::cpu {

// c[M, N] (row-major, contiguous, of dtype `out`) = a[M, K] b[K, N], a and b of dtype `in` with
// element strides (a_s0, a_s1) and (b_s0, b_s1); accumulation in f32. With `bias` (N contiguous
// values of dtype `in`), c = bias + a b, added to the f32 sum before its one rounding. False,
// computing nothing, where oneDNN has no primitive for the geometry (the caller takes another path).
bool onednn_matmul(DType in, DType out, int64_t M, int64_t N, int64_t K, const void* a, int64_t a_s0, int64_t a_s1,
                   const void* b, int64_t b_s0, int64_t b_s1, void* c, const void* bias = nullptr);

}  // namespace tr::cpu
