#include "nn/kv_cache.h"
#include "core/error.h"
#include "core/grad_mode.h"
#include "ops/ops.h"

namespace tr::nn {

namespace {

thread_local KVCache* g_active = nullptr;

// Makes a cache the thread's active one for a scope.
class ActiveCache {
 public:
  explicit ActiveCache(KVCache* c) { g_active = c; }
  ~ActiveCache() { g_active = nullptr; }
  ActiveCache(const ActiveCache&) = delete;
  ActiveCache& operator=(const ActiveCache&) = delete;
};

}  // namespace

KVCache* KVCache::active() { return g_active; }

void KVCache::clear() {
  entries_.clear();
  length_ = 0;
}

Tensor KVCache::forward(Module& model, const Tensor& ids) {
  TR_CHECK(g_active == nullptr, "KVCache::forward: a cache is already active on this thread (nested decoding)");
  TR_CHECK((ids.dim() == 1 || ids.dim() == 2) && ids.size(-1) > 0,
           "KVCache::forward: expected token ids [B, T] or [T] with T > 0, got shape ", ids.sizes());
  const int64_t T = ids.size(-1);
  NoGradGuard no_grad;
  Tensor out;
  try {
    ActiveCache on(this);
    out = model(ids);
    for (const auto& [layer, e] : entries_)
      TR_CHECK(e.k.size(2) == length_ + T, "KVCache: layer ", layer->type_name(), " holds ", e.k.size(2),
               " positions after a forward of ", T, " new ones on ", length_, " cached");
  } catch (...) {
    clear();  // some layers may have appended and others not: the cache no longer describes one context
    throw;
  }
  length_ += T;
  return out;
}

std::pair<Tensor, Tensor> KVCache::append(const Module& layer, const Tensor& k, const Tensor& v) {
  TR_CHECK(k.dim() == 4 && v.sizes() == k.sizes(), "KVCache::append (", layer.type_name(),
           "): expected k and v [B, H, T, D] of one shape, got ", k.sizes(), " and ", v.sizes());
  Entry& e = entries_[&layer];
  if (!e.k.defined()) {
    TR_CHECK(length_ == 0, "KVCache::append: layer ", layer.type_name(), " appends for the first time at position ",
             length_, "; it did not run on the cached positions");
    e.k = k.contiguous();
    e.v = v.contiguous();
  } else {
    TR_CHECK(e.k.size(2) == length_, "KVCache::append: layer ", layer.type_name(), " already holds ", e.k.size(2),
             " positions of ", length_, " (called twice in one forward?)");
    e.k = cat({e.k, k}, 2);
    e.v = cat({e.v, v}, 2);
  }
  return {e.k, e.v};
}

}  // namespace tr::nn
