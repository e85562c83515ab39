// LinearLR: the factor goes linearly from start_factor to end_factor over total_iters (torch.optim.lr_scheduler.LinearLR).
#pragma once
#include "optim/lr_scheduler.h"

namespace tr::optim {

class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& opt, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);
  std::string type_name() const override { return "LinearLR"; }
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& s) override;

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

}  // namespace tr::optim
