#include "ops/cpu/onednn_matmul.h"
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include "core/error.h"
#include "ops/cpu/onednn.h"

namespace tr::cpu {

namespace {

struct Prepared {
  dnnl::memory::desc a, b, c, bias;
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

using Key = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool>;

// The cached primitive of a geometry; null where oneDNN has none (remembered too).
const Prepared* prepared(DType in, DType out, int64_t M, int64_t N, int64_t K, int64_t as0, int64_t as1, int64_t bs0,
                         int64_t bs1, bool has_bias) {
  static std::mutex mu;
  static std::map<Key, std::unique_ptr<Prepared>> cache;
  const Key key{int(in), int(out), M, N, K, as0, as1, bs0, bs1, has_bias};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second.get();
  std::unique_ptr<Prepared> p;
  try {
    using dims = dnnl::memory::dims;
    const auto ti = onednn_type(in, "onednn_matmul"), to = onednn_type(out, "onednn_matmul");
    dnnl::memory::desc a({M, K}, ti, dims{as0, as1}), b({K, N}, ti, dims{bs0, bs1}), c({M, N}, to, dims{N, 1});
    dnnl::memory::desc bias = has_bias ? dnnl::memory::desc({1, N}, ti, dims{N, 1}) : dnnl::memory::desc();
    dnnl::matmul::primitive_desc pd(has_bias ? dnnl::matmul::desc(a, b, bias, c) : dnnl::matmul::desc(a, b, c),
                                    onednn_user_scratchpad(), onednn_engine());
    p = std::make_unique<Prepared>(Prepared{a, b, c, bias, pd, dnnl::matmul(pd)});
  } catch (const dnnl::error&) {
    // e.g. bf16 where the CPU has no bf16 kernels: the caller takes another path
  }
  return cache.emplace(key, std::move(p)).first->second.get();
}

}  // namespace

bool onednn_matmul(DType in, DType out, int64_t M, int64_t N, int64_t K, const void* a, int64_t a_s0, int64_t a_s1,
                   const void* b, int64_t b_s0, int64_t b_s1, void* c, const void* bias) {
  // oneDNN wants positive strides; a size-1 dim's stride is free
  auto fix = [](int64_t& s, int64_t other_size) {
    if (s <= 0) s = std::max<int64_t>(other_size, 1);
  };
  fix(a_s0, K);
  fix(a_s1, 1);
  fix(b_s0, N);
  fix(b_s1, 1);
  const Prepared* p = prepared(in, out, M, N, K, a_s0, a_s1, b_s0, b_s1, bias != nullptr);
  if (p == nullptr) return false;
  try {
    dnnl::engine& e = onednn_engine();
    Tensor keep;
    dnnl::memory am(p->a, e, const_cast<void*>(a)), bm(p->b, e, const_cast<void*>(b)), cm(p->c, e, c);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, am},
                                               {DNNL_ARG_WEIGHTS, bm},
                                               {DNNL_ARG_DST, cm},
                                               {DNNL_ARG_SCRATCHPAD, onednn_scratchpad(p->pd.scratchpad_desc(), keep)}};
    if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, dnnl::memory(p->bias, e, const_cast<void*>(bias)));
    p->prim.execute(onednn_stream(), args);
    onednn_stream().wait();
  } catch (const dnnl::error& e) {
    throw Error(str("oneDNN matmul of ", dtype_name(in), " [", M, ", ", K, "] x [", K, ", ", N, "] (strides ", a_s0,
                    ", ", a_s1, " and ", b_s0, ", ", b_s1, "): ", e.what()));
  }
  return true;
}

}  // namespace tr::cpu
