// GradScaler (torch.cuda.amp.GradScaler, torch 1.13) for any device: dynamic loss scaling for
// mixed precision training.
//
//   scaler.scale(loss).backward();   // gradients are scale x the true ones
//   scaler.unscale_(opt);            // optional: g *= 1/scale, so clipping sees true gradients
//   scaler.step(opt);                // unscales if not done yet; skips opt.step() on inf/NaN
//   scaler.update();                 // backoff on inf/NaN, else grow every growth_interval steps
//
// Each optimizer goes READY -unscale_-> UNSCALED -step-> STEPPED, and update() puts every one
// back to READY; calls out of that order are errors, as in torch. The scale is a float32 value
// and its arithmetic is rounded to float32 as torch's float32 scale tensor is. Unlike torch, the
// scale lives on the host (no lazy init from the first scale() call), so unscale_/step/update do
// not require scale() to have been called first.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include "core/tensor.h"

namespace tr::optim {
class Optimizer;
}

namespace tr::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;   // must be > 1
  double backoff_factor = 0.5;  // must be < 1
  int64_t growth_interval = 2000;
  bool enabled = true;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions o = {});

  // outputs * scale, the scale as a float32 tensor of shape [1] on outputs' device (so a 0-dim
  // f16 loss comes back as a [1] f32 tensor, as in torch). The input itself when disabled.
  Tensor scale(const Tensor& outputs) const;

  // Multiplies every gradient of `opt` in place by inv_scale = float32(1 / scale) and records
  // whether any element was inf/NaN before the multiply. Undefined gradients are skipped; f16
  // gradients are an error (torch's allow_fp16=False), so are non-float ones. Under DDP the
  // gradients are already averaged over the ranks, so every rank finds the same inf/NaN and skips
  // the same steps without a collective of its own (as torch's GradScaler).
  void unscale_(optim::Optimizer& opt);
  // opt.step() unless the gradients of `opt` had an inf/NaN (unscale_ first when READY). Returns
  // whether it stepped. Disabled: always steps.
  bool step(optim::Optimizer& opt);
  // found_inf in any optimizer unscaled since the last update: scale *= backoff_factor and the
  // growth tracker resets; else tracker += 1 and, on reaching growth_interval, scale *=
  // growth_factor (kept if finite) and tracker = 0. Requires at least one recorded inf check.
  void update();
  // Sets the scale (rounded to float32); the growth tracker is kept.
  void update(double new_scale);

  double get_scale() const;  // 1.0 when disabled
  int64_t growth_tracker() const { return tracker_; }
  double get_growth_factor() const { return growth_factor_; }
  double get_backoff_factor() const { return backoff_factor_; }
  int64_t get_growth_interval() const { return growth_interval_; }
  bool is_enabled() const { return enabled_; }
  // Steps skipped by step() because of inf/NaN gradients (not part of the state dict).
  int64_t skipped_steps() const { return skipped_; }
  void set_skipped_steps(int64_t n) { skipped_ = n; }
  // Gradients sharded over ranks (ZeRO: each rank holds a part of them) must agree on whether any
  // part holds an inf/NaN, as torch's ShardedGradScaler allreduces found_inf: unscale_ passes its
  // own finding to `reduce` and keeps the answer (a collective: every rank calls unscale_).
  void set_found_inf_reducer(std::function<bool(bool)> reduce) { reduce_found_inf_ = std::move(reduce); }
  // Whether the last unscale_ of `opt` since update() found an inf/NaN (false before any).
  bool found_inf(const optim::Optimizer& opt) const {
    auto it = states_.find(&opt);
    return it != states_.end() && it->second.found_inf;
  }

  // torch's keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker ({} when
  // disabled). load_state_dict does nothing when disabled and rejects an empty state.
  nlohmann::json state_dict() const;
  void load_state_dict(const nlohmann::json& s);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct OptState {
    Stage stage = Stage::Ready;
    bool checked = false;  // an inf check was recorded (the optimizer had a gradient)
    bool found_inf = false;
  };

  bool enabled_;
  float scale_;
  double growth_factor_;
  double backoff_factor_;
  int64_t growth_interval_;
  int64_t tracker_ = 0;
  int64_t skipped_ = 0;
  std::map<const optim::Optimizer*, OptState> states_;  // torch keys by id(optimizer)
  std::function<bool(bool)> reduce_found_inf_;
};

}  // namespace tr::amp
