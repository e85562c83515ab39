// Builds the optimizer of a run config: parameter groups from [[optimizer.groups]] rules, then
// SGD / Adam / AdamW with the [optimizer] hyperparameters as every group's defaults.
#pragma once
#include <memory>
#include <string>
#include <vector>
#include "config/run_config.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace tr::train {

// Warnings (an empty group, a glob that matches nothing) are appended to `warnings`.
std::unique_ptr<optim::Optimizer> make_optimizer(const config::RunConfig& cfg, nn::Module& model,
                                                 std::vector<std::string>* warnings);

}  // namespace tr::train
