// ExponentialLR: lr *= gamma every epoch (or step) (torch.optim.lr_scheduler.ExponentialLR).
#pragma once
#include "optim/lr_scheduler.h"

namespace tr::optim {

class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& opt, double gamma);
  std::string type_name() const override { return "ExponentialLR"; }
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& s) override;

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  double gamma_;
};

}  // namespace tr::optim
