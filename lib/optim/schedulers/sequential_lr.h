// SequentialLR: one scheduler after another, switching at milestones (torch.optim.lr_scheduler.SequentialLR).
#pragma once
#include <memory>
#include "optim/lr_scheduler.h"

namespace tr::optim {

// torch 1.13 semantics: at construction the group lrs go back to initial_lr, every child's
// last_epoch is rewound by one and only the first child re-does its initial step; at a milestone
// the next child is stepped with step(0) (closed form where it has one), afterwards with step().
// Its state_dict has torch's keys: _schedulers (the children's), _milestones, last_epoch, _last_lr.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& opt, std::vector<std::unique_ptr<LRScheduler>> schedulers, std::vector<int64_t> milestones);
  std::string type_name() const override { return "SequentialLR"; }
  void step() override;
  void step(int64_t epoch) override;  // an error, as in torch (SequentialLR.step takes no epoch)
  void optimizer_stepped() override;
  void set_interval(const std::string& interval) override;
  const std::vector<std::unique_ptr<LRScheduler>>& schedulers() const { return schedulers_; }
  const std::vector<int64_t>& milestones() const { return milestones_; }
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& s) override;

 protected:
  std::vector<double> get_lr() override;  // not used

 private:
  std::vector<std::unique_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

}  // namespace tr::optim
