// Autocast (torch.autocast): while enabled for a device type, ops on that device cast their
// floating inputs by their op's policy: matmul-like ops to the low precision dtype, numerically
// sensitive ops (softmax, losses, norms, reductions, exp/log) to f32, multi-input ops to the widest
// input type. Parameters (leaf tensors that require grad) are cast once per autocast region and
// the cast reused. The state is per thread, as torch's; kernels and the backward pass run with
// autocast off (the backward of a cast op gives the gradient in the input's dtype).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>
#include "core/tensor.h"

namespace tr::amp {

// An op's autocast policy (the OpDef field; torch's autocast op lists).
enum class CastPolicy : uint8_t {
  None,            // runs on its inputs as given (elementwise ops, views, ...)
  LowerPrecision,  // f32 inputs -> the autocast dtype (mm, bmm, conv2d, linear)
  Fp32,            // f16/bf16 inputs -> f32 (softmax, log_softmax, losses, norms, sum, exp, log, ...)
  Promote,         // floating inputs -> the widest floating dtype among them (cat, ...)
};

bool is_autocast_enabled(DeviceType d);
DType get_autocast_dtype(DeviceType d);  // cpu: bf16, cuda: f16 unless set
// Enabled for d and not inside a kernel or a backward pass.
bool autocast_active(DeviceType d);

// with torch.autocast(device_type, dtype, enabled): sets the state for `d` in this scope and
// restores it after; leaving the outermost enabled scope clears the cast cache.
class AutocastGuard {
 public:
  AutocastGuard(DeviceType d, DType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType device_;
  bool prev_enabled_;
  DType prev_dtype_;
};

// Turns autocast off in this scope (kernels, the autograd engine).
class AutocastExcludeGuard {
 public:
  AutocastExcludeGuard();
  ~AutocastExcludeGuard();
  AutocastExcludeGuard(const AutocastExcludeGuard&) = delete;
  AutocastExcludeGuard& operator=(const AutocastExcludeGuard&) = delete;

 private:
  bool prev_;
};

// The autocast state of this thread as ops see it: per device type, whether autocast is active
// (enabled and not excluded) and its dtype. torch.utils.checkpoint saves it at forward and
// re-enters it for the recomputation in backward, where the engine has turned autocast off.
struct AutocastState {
  bool active[kNumDeviceTypes] = {};
  DType dtype[kNumDeviceTypes] = {};
};
AutocastState current_autocast_state();

// Enters `s` in this scope as an autocast region of its own: lifts an enclosing
// AutocastExcludeGuard and starts with an empty parameter cast cache (the casts recorded inside
// belong to this region's graph); everything, the cache included, is restored on exit.
class AutocastStateGuard {
 public:
  explicit AutocastStateGuard(const AutocastState& s);
  ~AutocastStateGuard();
  AutocastStateGuard(const AutocastStateGuard&) = delete;
  AutocastStateGuard& operator=(const AutocastStateGuard&) = delete;

 private:
  struct Saved;
  std::unique_ptr<Saved> saved_;
};

// The inputs of an op with policy `p` running on device type `d` under autocast.
std::vector<Tensor> autocast_inputs(CastPolicy p, std::vector<Tensor> inputs, DeviceType d);
// For composite functions (linear, layer_norm, losses): `t` as policy `p` would cast it, or `t`
// itself when autocast is not active for its device.
Tensor autocast_arg(CastPolicy p, const Tensor& t);

// The parameters this thread's autocast region has cast so far: what the next region of a
// training loop may hand to precast_parameters.
std::vector<Tensor> cast_parameters();
// Casts `params` to the autocast dtype of their device as one _fused_cast (one launch on CUDA for
// them all, and one for their gradients) and caches the casts for this region, as their first uses
// would have: same values, one graph node. Parameters already cached, not leaves requiring grad, or
// of the autocast dtype already are left to their uses. A no-op outside an active region.
void precast_parameters(const std::vector<Tensor>& params);

// Number of cached parameter casts (tests) and clearing them (torch.clear_autocast_cache).
size_t autocast_cache_size();
void clear_autocast_cache();

}  // namespace tr::amp
