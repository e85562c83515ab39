// Autocast state (per thread), the per-policy input casts and the parameter cast cache.
#include "ops/autocast.h"
#include <map>
#include <optional>
#include <utility>
#include "core/grad_mode.h"
#include "core/error.h"
#include "ops/fused_cast.h"
#include "ops/ops.h"

namespace tr::amp {

namespace {

struct State {
  bool enabled[kNumDeviceTypes] = {};
  DType dtype[kNumDeviceTypes] = {};
  bool excluded = false;
  int depth = 0;  // enabled guards alive on this thread
  // (parameter, dtype) -> its cast; entries hold the parameter so the key stays valid
  std::map<std::pair<const TensorImpl*, DType>, std::pair<Tensor, Tensor>> cache;
  State() {
    for (auto& d : dtype) d = DType::F16;
    dtype[int(DeviceType::CPU)] = DType::BF16;
  }
};

State& state() {
  thread_local State s;
  return s;
}

bool eligible(const Tensor& t) {
  return t.defined() && is_floating(t.dtype()) && t.dtype() != DType::F64 && !t.is_wrapped_number();
}

// cast with the cache for parameters: one cast per parameter and dtype per autocast region
Tensor cached_cast(const Tensor& t, DType to) {
  if (t.dtype() == to) return t;
  State& s = state();
  const bool cacheable = t.requires_grad() && !t.grad_fn() && GradMode::is_enabled();
  if (!cacheable) return cast(t, to);
  auto key = std::make_pair(static_cast<const TensorImpl*>(t.impl()), to);
  auto it = s.cache.find(key);
  if (it != s.cache.end()) return it->second.second;
  Tensor c = cast(t, to);
  s.cache.emplace(key, std::make_pair(t, c));
  return c;
}

}  // namespace

bool is_autocast_enabled(DeviceType d) { return state().enabled[int(d)]; }
DType get_autocast_dtype(DeviceType d) { return state().dtype[int(d)]; }
bool autocast_active(DeviceType d) {
  const State& s = state();
  return s.enabled[int(d)] && !s.excluded;
}

AutocastGuard::AutocastGuard(DeviceType d, DType dtype, bool enabled) : device_(d) {
  TR_CHECK(dtype == DType::BF16 || dtype == DType::F16, "autocast: dtype must be bfloat16 or float16, got ",
           dtype_name(dtype));
  State& s = state();
  prev_enabled_ = s.enabled[int(d)];
  prev_dtype_ = s.dtype[int(d)];
  s.enabled[int(d)] = enabled;
  s.dtype[int(d)] = dtype;
  if (enabled) ++s.depth;
}

AutocastGuard::~AutocastGuard() {
  State& s = state();
  if (s.enabled[int(device_)] && --s.depth == 0) s.cache.clear();
  s.enabled[int(device_)] = prev_enabled_;
  s.dtype[int(device_)] = prev_dtype_;
}

AutocastExcludeGuard::AutocastExcludeGuard() : prev_(state().excluded) { state().excluded = true; }
AutocastExcludeGuard::~AutocastExcludeGuard() { state().excluded = prev_; }

AutocastState current_autocast_state() {
  const State& s = state();
  AutocastState r;
  for (int d = 0; d < kNumDeviceTypes; ++d) {
    r.active[d] = s.enabled[d] && !s.excluded;
    r.dtype[d] = s.dtype[d];
  }
  return r;
}

struct AutocastStateGuard::Saved {
  State state;  // the whole per-thread state, cache included, swapped out for the region
};

AutocastStateGuard::AutocastStateGuard(const AutocastState& a) : saved_(std::make_unique<Saved>()) {
  State& s = state();
  std::swap(saved_->state, s);
  // s is now a fresh State (empty cache); set the region's flags. The depth counts the enabled
  // devices so that a nested AutocastGuard leaving does not clear this region's cache.
  for (int d = 0; d < kNumDeviceTypes; ++d) {
    s.enabled[d] = a.active[d];
    s.dtype[d] = a.dtype[d];
    if (a.active[d]) ++s.depth;
  }
  s.excluded = false;
}

AutocastStateGuard::~AutocastStateGuard() { std::swap(saved_->state, state()); }

std::vector<Tensor> autocast_inputs(CastPolicy p, std::vector<Tensor> inputs, DeviceType d) {
  switch (p) {
    case CastPolicy::None: break;
    case CastPolicy::LowerPrecision: {
      const DType lo = get_autocast_dtype(d);
      for (Tensor& t : inputs)
        if (eligible(t)) t = cached_cast(t, lo);
      break;
    }
    case CastPolicy::Fp32:
      for (Tensor& t : inputs)
        if (eligible(t)) t = cached_cast(t, DType::F32);
      break;
    case CastPolicy::Promote: {
      // the widest of the floating dtypes: f32 over f16/bf16; f16 with bf16 gives f32 (result_type)
      std::optional<DType> w;
      for (const Tensor& t : inputs)
        if (eligible(t)) w = w ? promote_types(*w, t.dtype()) : t.dtype();
      if (w)
        for (Tensor& t : inputs)
          if (eligible(t)) t = cached_cast(t, *w);
      break;
    }
  }
  return inputs;
}

Tensor autocast_arg(CastPolicy p, const Tensor& t) {
  if (!t.defined() || !autocast_active(t.device().type)) return t;
  return autocast_inputs(p, {t}, t.device().type)[0];
}

std::vector<Tensor> cast_parameters() {
  std::vector<Tensor> r;
  for (const auto& [key, pc] : state().cache) r.push_back(pc.first);
  return r;
}

void precast_parameters(const std::vector<Tensor>& params) {
  if (params.empty() || !autocast_active(params[0].device().type) || !GradMode::is_enabled()) return;
  State& s = state();
  const DType to = s.dtype[int(params[0].device().type)];
  std::vector<Tensor> todo;
  for (const Tensor& p : params)
    if (eligible(p) && p.dtype() != to && p.requires_grad() && !p.grad_fn() && p.device() == params[0].device() &&
        !s.cache.count({static_cast<const TensorImpl*>(p.impl()), to}))
      todo.push_back(p);
  if (todo.empty()) return;
  const std::vector<Tensor> casts = fused_cast(todo, to);
  for (size_t i = 0; i < todo.size(); ++i)
    s.cache.emplace(std::make_pair(static_cast<const TensorImpl*>(todo[i].impl()), to),
                    std::make_pair(todo[i], casts[i]));
}

size_t autocast_cache_size() { return state().cache.size(); }
void clear_autocast_cache() { state().cache.clear(); }

}  // namespace tr::amp
