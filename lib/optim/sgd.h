// SGD with momentum, dampening, Nesterov, weight decay and maximize: torch.optim.SGD's update.
#pragma once
#include "optim/optimizer.h"

namespace tr::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
  // Keys: lr, momentum, dampening, weight_decay, nesterov, maximize.
  Options to_map() const;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, SGDOptions defaults);
  SGD(std::vector<Tensor> params, SGDOptions defaults);
  std::string type_name() const override { return "SGD"; }
  // {"momentum_buffer"} when the group has momentum, else nothing (torch keeps None there).
  std::vector<std::string> state_keys(const Options& group) const override;

 protected:
  void do_step() override;
  void check_options(const Options& o, const std::string& group) const override;
};

}  // namespace tr::optim
