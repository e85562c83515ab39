// StepLR: lr *= gamma every step_size epochs (or steps) (torch.optim.lr_scheduler.StepLR).
#pragma once
#include "optim/lr_scheduler.h"

namespace tr::optim {

class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);
  std::string type_name() const override { return "StepLR"; }
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& s) override;

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

}  // namespace tr::optim
