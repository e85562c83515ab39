#include "ops/cpu/onednn_matmul.h"
#include <oneapi/dnnl/dnnl.hpp>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>
#include "core/error.h"
#include "ops/cpu/cpu_isa.h"

namespace tr::cpu {

namespace {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::memory::data_type dnnl_type(DType t) {
  switch (t) {
    case DType::F32: return dnnl::memory::data_type::f32;
    case DType::BF16: return dnnl::memory::data_type::bf16;
    default: TR_CHECK(false, "onednn_matmul: no oneDNN type for ", dtype_name(t));
  }
  return dnnl::memory::data_type::undef;
}

struct Prepared {
  dnnl::memory::desc a, b, c;
  dnnl::matmul prim;
  size_t scratch_bytes;
};

using Key = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;

// The cached primitive of a geometry; null where oneDNN has none (remembered too).
const Prepared* prepared(DType in, DType out, int64_t M, int64_t N, int64_t K, int64_t as0, int64_t as1, int64_t bs0,
                         int64_t bs1) {
  static std::mutex mu;
  static std::map<Key, std::unique_ptr<Prepared>> cache;
  const Key key{int(in), int(out), M, N, K, as0, as1, bs0, bs1};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second.get();
  std::unique_ptr<Prepared> p;
  try {
    using dims = dnnl::memory::dims;
    dnnl::memory::desc a({M, K}, dnnl_type(in), dims{as0, as1}), b({K, N}, dnnl_type(in), dims{bs0, bs1}),
        c({M, N}, dnnl_type(out), dims{N, 1});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine());
    p = std::make_unique<Prepared>(Prepared{a, b, c, dnnl::matmul(pd), pd.scratchpad_desc().get_size()});
  } catch (const dnnl::error&) {
    // e.g. bf16 where the CPU has no bf16 kernels: the caller takes another path
  }
  return cache.emplace(key, std::move(p)).first->second.get();
}

}  // namespace

bool onednn_bf16_available() {
  static const bool ok = use_avx512() && __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl");
  return ok;
}

bool onednn_bf16_preferred() {
  static const bool ok = onednn_bf16_available() && __builtin_cpu_is("amd");
  return ok;
}

bool onednn_matmul(DType in, DType out, int64_t M, int64_t N, int64_t K, const void* a, int64_t a_s0, int64_t a_s1,
                   const void* b, int64_t b_s0, int64_t b_s1, void* c) {
  // oneDNN wants positive strides; a size-1 dim's stride is free
  auto fix = [](int64_t& s, int64_t other_size) { if (s <= 0) s = std::max<int64_t>(other_size, 1); };
  fix(a_s0, K);
  fix(a_s1, 1);
  fix(b_s0, N);
  fix(b_s1, 1);
  const Prepared* pp = prepared(in, out, M, N, K, a_s0, a_s1, b_s0, b_s1);
  if (pp == nullptr) return false;
  const Prepared& p = *pp;
  try {
    thread_local dnnl::stream stream(engine());
    thread_local std::vector<uint8_t> scratch;
    if (scratch.size() < p.scratch_bytes) scratch.resize(p.scratch_bytes);
    dnnl::memory am(p.a, engine(), const_cast<void*>(a)), bm(p.b, engine(), const_cast<void*>(b)), cm(p.c, engine(), c);
    dnnl::memory sm(dnnl::memory::desc({int64_t(p.scratch_bytes)}, dnnl::memory::data_type::u8, dnnl::memory::dims{1}),
                    engine(), scratch.data());
    p.prim.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, sm}});
    stream.wait();
  } catch (const dnnl::error& e) {
    throw Error(str("oneDNN matmul of ", dtype_name(in), " [", M, ", ", K, "] x [", K, ", ", N, "] (strides ", a_s0,
                    ", ", a_s1, " and ", b_s0, ", ", b_s1, "): ", e.what()));
  }
  return true;
}

}  // namespace tr::cpu
