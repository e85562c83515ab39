// ConstantLR: lr = base_lr * factor until total_iters, then base_lr (torch.optim.lr_scheduler.ConstantLR).
#pragma once
#include "optim/lr_scheduler.h"

namespace tr::optim {

class ConstantLR : public LRScheduler {
 public:
  ConstantLR(Optimizer& opt, double factor = 1.0 / 3, int64_t total_iters = 5);
  std::string type_name() const override { return "ConstantLR"; }
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& s) override;

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  double factor_;
  int64_t total_iters_;
};

}  // namespace tr::optim
