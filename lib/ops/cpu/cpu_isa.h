// Which vector instructions trainer's own CPU kernels may use: what the CPU and OS enable, capped by
// TR_CPU_ISA=avx2 (to measure on an AVX-512 machine what an AVX2-only one runs; oneDNN's and
// OpenBLAS's own caps are ONEDNN_MAX_CPU_ISA and OPENBLAS_CORETYPE). Read once.
#pragma once

namespace tr::cpu {

// avx512f (and the kernels' AVX-512 paths) allowed
bool use_avx512();
// and AVX512_BF16 (vdpbf16ps) with avx512bw and avx512vl: native bf16 products, trainer's or oneDNN's
bool use_avx512_bf16();

}  // namespace tr::cpu
