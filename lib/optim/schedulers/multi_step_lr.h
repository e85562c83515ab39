// MultiStepLR: lr *= gamma at each milestone (torch.optim.lr_scheduler.MultiStepLR).
#pragma once
#include <map>
#include "optim/lr_scheduler.h"

namespace tr::optim {

class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& opt, const std::vector<int64_t>& milestones, double gamma = 0.1);
  std::string type_name() const override { return "MultiStepLR"; }
  // milestones as torch's Counter: {"<milestone>": count}.
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& s) override;

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  std::map<int64_t, int64_t> milestones_;  // milestone -> count
  double gamma_;
};

}  // namespace tr::optim
