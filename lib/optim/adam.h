// Adam and AdamW (torch.optim.Adam / AdamW, torch 1.13 single-tensor update), with amsgrad
// and maximize.
#pragma once
#include <memory>
#include "optim/optimizer.h"

namespace tr::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // Adam: L2 added to the gradient; AdamW: decoupled decay (torch's default 1e-2)
  bool amsgrad = false;
  bool maximize = false;
  // Keys: lr, beta1, beta2, eps, weight_decay, amsgrad, maximize.
  Options to_map() const;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<ParamGroup> groups, AdamOptions defaults, bool decoupled_weight_decay = false);
  std::string type_name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  // step, exp_avg, exp_avg_sq (+ max_exp_avg_sq with amsgrad); "step" is a 0-dim f32 tensor as torch's.
  std::vector<std::string> state_keys(const Options& group) const override;
  bool decoupled_weight_decay() const { return decoupled_; }

 protected:
  void do_step() override;
  void check_options(const Options& o, const std::string& group) const override;

 private:
  bool decoupled_;
};

// AdamW: Adam with decoupled weight decay (p *= 1 - lr * weight_decay before the update).
class AdamW : public Adam {
 public:
  AdamW(std::vector<ParamGroup> groups, AdamOptions defaults) : Adam(std::move(groups), defaults, true) {}
};

inline std::unique_ptr<Adam> make_adamw(std::vector<ParamGroup> groups, AdamOptions o) {
  return std::make_unique<AdamW>(std::move(groups), o);
}

}  // namespace tr::optim
