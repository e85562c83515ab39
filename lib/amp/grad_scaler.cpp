#include "amp/grad_scaler.h"
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>
#include "core/grad_mode.h"
#include "ops/ops.h"
#include "optim/json_field.h"
#include "optim/optimizer.h"

namespace tr::amp {

GradScaler::GradScaler(GradScalerOptions o)
    : enabled_(o.enabled),
      scale_(float(o.init_scale)),
      growth_factor_(o.growth_factor),
      backoff_factor_(o.backoff_factor),
      growth_interval_(o.growth_interval) {
  if (!enabled_) return;
  TR_CHECK(o.growth_factor > 1.0, "GradScaler: the growth factor must be > 1.0, got ", o.growth_factor);
  TR_CHECK(o.backoff_factor < 1.0, "GradScaler: the backoff factor must be < 1.0, got ", o.backoff_factor);
  TR_CHECK(o.growth_interval > 0, "GradScaler: growth_interval must be a positive integer, got ", o.growth_interval);
}

Tensor GradScaler::scale(const Tensor& outputs) const {
  if (!enabled_) return outputs;
  TR_CHECK(outputs.defined(), "GradScaler.scale: expected a defined tensor");
  return outputs * full({1}, double(scale_), TensorOptions(DType::F32).device(outputs.device()));
}

void GradScaler::unscale_(optim::Optimizer& opt) {
  if (!enabled_) return;
  OptState& st = states_[&opt];
  TR_CHECK(st.stage != Stage::Unscaled,
           "unscale_() has already been called on this optimizer since the last update().");
  TR_CHECK(st.stage != Stage::Stepped, "unscale_() is being called after step().");

  std::vector<Tensor> grads;
  for (const auto& g : opt.param_groups())
    for (const auto& p : g.params) {
      const Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      TR_CHECK(grad.dtype() != DType::F16, "Attempting to unscale FP16 gradients.");
      TR_CHECK(grad.dtype() == DType::F32 || grad.dtype() == DType::F64,
               "GradScaler.unscale_: gradients must be float32 or float64, got ", dtype_name(grad.dtype()),
               " in param group '", g.name, "'");
      grads.push_back(grad);
    }

  // torch: inv_scale = scale.double().reciprocal().float(). Each grad element is checked for
  // inf/NaN before it is multiplied (a finite g * inv_scale may overflow when scale < 1), and
  // multiplied regardless. The f32 * f32 product rounded once equals torch's float multiply.
  // The check: sum(g * 0) is NaN exactly when g holds an inf or a NaN (0 * inf = NaN), in two
  // passes and without the overflow a plain sum(g) could have; one probe per device, read once.
  const double inv_scale = double(float(1.0 / double(scale_)));
  NoGradGuard no_grad;
  std::vector<std::pair<Device, Tensor>> probes;
  for (Tensor& g : grads) {
    Tensor n = sum(g * 0.0);
    auto it = std::find_if(probes.begin(), probes.end(), [&](const auto& d) { return d.first == g.device(); });
    if (it == probes.end())
      probes.emplace_back(g.device(), n);
    else
      it->second = it->second + n;
    g.mul_(inv_scale);
  }
  bool found = false;
  for (auto& [dev, n] : probes) found = found || !std::isfinite(n.item());

  st.checked = !grads.empty();
  if (reduce_found_inf_) {  // a rank may hold no gradient at all; the group as a whole checked
    found = reduce_found_inf_(found);
    st.checked = true;
  }
  st.found_inf = found;
  st.stage = Stage::Unscaled;
}

bool GradScaler::step(optim::Optimizer& opt) {
  if (!enabled_) {
    opt.step();
    return true;
  }
  OptState& st = states_[&opt];
  TR_CHECK(st.stage != Stage::Stepped, "step() has already been called since the last update().");
  if (st.stage == Stage::Ready) unscale_(opt);
  TR_CHECK(st.checked, "No inf checks were recorded for this optimizer (", opt.type_name(),
           " has no parameter with a gradient).");
  const bool stepped = !st.found_inf;
  if (stepped)
    opt.step();
  else
    ++skipped_;
  st.stage = Stage::Stepped;
  return stepped;
}

void GradScaler::update() {
  if (!enabled_) return;
  bool any_check = false, found = false;
  for (const auto& [opt, st] : states_) {
    any_check = any_check || st.checked;
    found = found || st.found_inf;
  }
  TR_CHECK(any_check,
           "No inf checks were recorded prior to update(): call step() or unscale_() with "
           "gradients since the last update().");
  // torch's _amp_update_scale_ on its float32 scale: products in double, stored as float.
  if (found) {
    scale_ = float(double(scale_) * backoff_factor_);
    tracker_ = 0;
  } else if (tracker_ + 1 == growth_interval_) {
    const float grown = float(double(scale_) * growth_factor_);
    if (std::isfinite(grown)) scale_ = grown;  // never grow past float32's range
    tracker_ = 0;
  } else {
    ++tracker_;
  }
  states_.clear();
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  scale_ = float(new_scale);
  states_.clear();
}

double GradScaler::get_scale() const { return enabled_ ? double(scale_) : 1.0; }

nlohmann::json GradScaler::state_dict() const {
  if (!enabled_) return nlohmann::json::object();
  return {{"scale", double(scale_)},
          {"growth_factor", growth_factor_},
          {"backoff_factor", backoff_factor_},
          {"growth_interval", growth_interval_},
          {"_growth_tracker", tracker_}};
}

void GradScaler::load_state_dict(const nlohmann::json& s) {
  if (!enabled_) return;
  TR_CHECK(s.is_object(), "GradScaler.load_state_dict: expected a JSON object, got ", s.type_name());
  TR_CHECK(!s.empty(),
           "GradScaler.load_state_dict: the source state dict is empty, possibly because it was "
           "saved from a disabled instance of GradScaler.");
  const std::string who = "GradScaler.load_state_dict";
  const double scale = optim::json_field<double>(s, "scale", who);
  const double growth = optim::json_field<double>(s, "growth_factor", who);
  const double backoff = optim::json_field<double>(s, "backoff_factor", who);
  const int64_t interval = optim::json_field<int64_t>(s, "growth_interval", who);
  const int64_t tracker = optim::json_field<int64_t>(s, "_growth_tracker", who);
  scale_ = float(scale);
  growth_factor_ = growth;
  backoff_factor_ = backoff;
  growth_interval_ = interval;
  tracker_ = tracker;
}

}  // namespace tr::amp
