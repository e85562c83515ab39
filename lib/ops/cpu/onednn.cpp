#include "ops/cpu/onednn.h"
#include <algorithm>
#include "core/error.h"
#include "ops/cpu/cpu_isa.h"
#include "ops/ops.h"

namespace tr::cpu {

dnnl::engine& onednn_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& onednn_stream() {
  thread_local dnnl::stream s(onednn_engine());
  return s;
}

dnnl::memory::data_type onednn_type(DType t, const char* what) {
  TR_CHECK(t == DType::F32 || t == DType::BF16, what, ": f32 or bf16 for oneDNN, got ", dtype_name(t));
  return t == DType::F32 ? dnnl::memory::data_type::f32 : dnnl::memory::data_type::bf16;
}

dnnl::primitive_attr onednn_user_scratchpad() {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

dnnl::memory onednn_scratchpad(const dnnl::memory::desc& desc, Tensor& keep) {
  keep = empty({int64_t((std::max<size_t>(desc.get_size(), 4) + 3) / 4)});
  return dnnl::memory(desc, onednn_engine(), keep.raw_data());
}

bool onednn_bf16_preferred() {
  static const bool ok = use_avx512_bf16() && __builtin_cpu_is("amd");
  return ok;
}

}  // namespace tr::cpu
