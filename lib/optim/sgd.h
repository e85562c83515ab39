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
  Options to_map() const;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, SGDOptions defaults);
  SGD(std::vector<Tensor> params, SGDOptions defaults);
  void step() override;
  std::string type_name() const override { return "SGD"; }
};

}  // namespace tr::optim
