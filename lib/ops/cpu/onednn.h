// What the oneDNN paths share (ops/cpu/onednn_matmul.cpp, ops/cpu/onednn_conv.cpp): the CPU
// engine, a stream per thread, the dtype mapping, and primitives that take their scratchpad from
// the caller, so that calls from several threads never share one.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include "core/tensor.h"

namespace tr::cpu {

dnnl::engine& onednn_engine();
dnnl::stream& onednn_stream();  // this thread's
// f32 or bf16 (else an error naming `what`)
dnnl::memory::data_type onednn_type(DType t, const char* what);
// attributes of a primitive whose scratchpad each call provides
dnnl::primitive_attr onednn_user_scratchpad();
// a scratchpad of `desc`'s size, in a tensor that `keep` owns for the call
dnnl::memory onednn_scratchpad(const dnnl::memory::desc& desc, Tensor& keep);

// True where oneDNN's native bf16 kernels are the faster bf16 path: AMD CPUs with AVX512_BF16 (Zen 4
// and 5 issue vdpbf16ps at the f32 FMA rate). Intel's without AMX issue it at half that rate
// (measured on an Emerald Rapids), where bf16 computes in f32 instead. The default of bf16 products
// and convolutions.
bool onednn_bf16_preferred();

}  // namespace tr::cpu
