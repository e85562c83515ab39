// Adam and AdamW (torch.optim.Adam / AdamW, torch 1.13 single-tensor update), with amsgrad
// and maximize.
#pragma once
#include "optim/optimizer.h"

namespace tr::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // Adam: L2 added to the gradient; AdamW: decoupled decay
  bool amsgrad = false;
  bool maximize = false;
  Options to_map() const;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<ParamGroup> groups, AdamOptions defaults, bool decoupled_weight_decay = false);
  void step() override;
  std::string type_name() const override { return decoupled_ ? "AdamW" : "Adam"; }

 private:
  bool decoupled_;
};

// AdamW: torch's default weight_decay is 0.01.
inline std::unique_ptr<Adam> make_adamw(std::vector<ParamGroup> groups, AdamOptions o) {
  return std::make_unique<Adam>(std::move(groups), o, true);
}

}  // namespace tr::optim
