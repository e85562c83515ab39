// AveragedModel: an exponential moving average (EMA) of a model's weights, as
// torch.optim.swa_utils.AveragedModel(model, avg_fn=ema_avg) with
//   ema_avg(ema, p, n) = decay * ema + (1 - decay) * p
// (torch 1.13's documented EMA; torch 2's get_ema_multi_avg_fn lerps, which rounds differently).
#pragma once
#include <cstdint>
#include "nn/module.h"

namespace tr::optim {

class AveragedModel {
 public:
  // `copy`: a module of the same architecture, dtype and device as `model` (built from the same
  // model definition); it receives `model`'s state now, as torch's deepcopy, and serves as the
  // averaged model from then on. decay in [0, 1).
  AveragedModel(nn::ModulePtr copy, const nn::Module& model, double decay);

  // Call after each optimizer step that was taken (not one the GradScaler skipped). As torch's
  // update_parameters with use_buffers=True: the first call copies parameters and buffers
  // (n_averaged == 0), later ones average every floating tensor
  //   ema = decay * ema + (1 - decay) * p   (rounded as torch's two products and a sum)
  // BatchNorm's running statistics included, as timm's ModelEmaV2 and YOLOv5's ModelEMA: the live
  // model's statistics describe its own weights, not their average, and with them the average
  // scored 18% where the model scored 76% (fmnist_resnet, epoch 1, docs/recipes.md). Integer
  // buffers (num_batches_tracked) are copied (torch 1.13 would average and truncate them).
  void update_parameters(const nn::Module& model);

  nn::Module& module() { return *module_; }
  const nn::Module& module() const { return *module_; }
  double decay() const { return decay_; }
  // How many update_parameters calls so far (torch's n_averaged buffer); checkpointed with the weights.
  int64_t n_averaged() const { return n_averaged_; }
  void set_n_averaged(int64_t n) { n_averaged_ = n; }

 private:
  nn::ModulePtr module_;
  double decay_;
  int64_t n_averaged_ = 0;
};

}  // namespace tr::optim
