// CosineAnnealingLR: cosine decay from base_lr to eta_min over T_max (torch.optim.lr_scheduler.CosineAnnealingLR).
#pragma once
#include "optim/lr_scheduler.h"

namespace tr::optim {

// step() uses torch's recursive form (which, past T_max, climbs back up: SGDR without restarts).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min = 0.0);
  std::string type_name() const override { return "CosineAnnealingLR"; }
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& s) override;

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

}  // namespace tr::optim
