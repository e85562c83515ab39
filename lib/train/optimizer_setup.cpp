#include "train/optimizer_setup.h"
#include "optim/adam.h"
#include "optim/param_groups.h"
#include "optim/sgd.h"

namespace tr::train {

std::unique_ptr<optim::Optimizer> make_optimizer(const config::RunConfig& cfg, nn::Module& model,
                                                 std::vector<std::string>* warnings) {
  const auto& oc = cfg.optimizer;
  static const toml::array no_rules;
  std::vector<optim::ParamGroup> groups = optim::build_param_groups(
      model, optim::parse_group_rules(oc.groups ? *oc.groups : no_rules, cfg.path, oc.type), warnings);
  if (oc.type == "sgd") {
    optim::SGDOptions so;
    so.lr = oc.lr;
    so.momentum = oc.momentum;
    so.dampening = oc.dampening;
    so.weight_decay = oc.weight_decay;
    so.nesterov = oc.nesterov;
    so.maximize = oc.maximize;
    return std::make_unique<optim::SGD>(std::move(groups), so);
  }
  optim::AdamOptions ao;
  ao.lr = oc.lr;
  ao.beta1 = oc.betas[0];
  ao.beta2 = oc.betas[1];
  ao.eps = oc.eps;
  ao.weight_decay = oc.weight_decay;
  ao.amsgrad = oc.amsgrad;
  ao.maximize = oc.maximize;
  if (oc.type == "adamw") return std::make_unique<optim::AdamW>(std::move(groups), ao);
  return std::make_unique<optim::Adam>(std::move(groups), ao);
}

}  // namespace tr::train
