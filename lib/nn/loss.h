// Loss modules (torch.nn's *Loss classes) and the loss registry behind a run config's [loss]
// section: Registry<LossType>, one entry per loss, each registered from its own file in nn/losses/.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include "core/registry.h"
#include "nn/module.h"
#include "toml/toml_table.h"

namespace tr::nn {

// forward({input, target}) or loss(input, target); reduction is "mean" | "sum" | "none".
class Loss : public Module {
 public:
  using Module::operator();
  using Module::forward;
  Tensor operator()(const Tensor& input, const Tensor& target) {
    return Module::operator()(std::vector<Tensor>{input, target});
  }
  Tensor forward(const std::vector<Tensor>& xs) override;
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  std::string reduction;

 protected:
  Loss(std::string type_name, std::string reduction);
};

using LossPtr = std::shared_ptr<Loss>;

// A loss a run config can name: [loss] type = "<name>" (the rest of the table is its keys).
struct LossType {
  std::function<LossPtr(const TomlTable& t)> build;  // reads its keys from t ("mean" reduction)
  std::string doc;                                   // one line: the keys it takes
  // A classification loss compares logits over classes with class indices: outputs [B, C] (or
  // [B, T, V], scored per token) against targets [B] ([B, T]); accuracy is reported for it.
  bool classification = false;

  static constexpr const char* kRegistryKind = "loss";
};

#define TR_REGISTER_LOSS(NAME, ...)                                                                          \
  static const ::tr::Registrar<::tr::nn::LossType> TR_REGISTRY_CONCAT(tr_loss_registrar_, __COUNTER__)(NAME, \
                                                                                                       __VA_ARGS__)

}  // namespace tr::nn
