// AveragedModel: the EMA update, in torch's operation order (optim/averaged_model.h).
#include "optim/averaged_model.h"
#include "core/error.h"
#include "core/grad_mode.h"
#include "ops/ops.h"

namespace tr::optim {

namespace {

// The same names in the same order: the copy must be the model's architecture.
void check_same(const nn::NamedTensors& mine, const nn::NamedTensors& theirs, const char* what) {
  TR_CHECK(mine.size() == theirs.size(), "AveragedModel: the averaged copy has ", mine.size(), " ", what,
           ", the model ", theirs.size());
  for (size_t i = 0; i < mine.size(); ++i)
    TR_CHECK(mine[i].first == theirs[i].first && mine[i].second.sizes() == theirs[i].second.sizes(),
             "AveragedModel: ", what, " ", i, " is '", mine[i].first, "' ", mine[i].second.sizes(),
             " in the averaged copy but '", theirs[i].first, "' ", theirs[i].second.sizes(), " in the model");
}

}  // namespace

AveragedModel::AveragedModel(nn::ModulePtr copy, const nn::Module& model, double decay)
    : module_(std::move(copy)), decay_(decay) {
  TR_CHECK(module_, "AveragedModel: no module");
  TR_CHECK(decay >= 0 && decay < 1, "AveragedModel: decay must be in [0, 1), got ", decay);
  check_same(module_->named_parameters(), model.named_parameters(), "parameters");
  check_same(module_->named_buffers(), model.named_buffers(), "buffers");
  module_->load_state_dict(model.state_dict(), true);
}

void AveragedModel::update_parameters(const nn::Module& model) {
  NoGradGuard ng;
  nn::NamedTensors mine = module_->named_parameters(), theirs = model.named_parameters();
  nn::NamedTensors mb = module_->named_buffers(), tb = model.named_buffers();
  TR_CHECK(mine.size() == theirs.size() && mb.size() == tb.size(), "AveragedModel: the model has ", theirs.size(),
           " parameters and ", tb.size(), " buffers, the averaged copy ", mine.size(), " and ", mb.size());
  mine.insert(mine.end(), mb.begin(), mb.end());
  theirs.insert(theirs.end(), tb.begin(), tb.end());
  for (size_t i = 0; i < mine.size(); ++i) {
    Tensor& e = mine[i].second;
    const Tensor p = theirs[i].second.detach();
    if (n_averaged_ == 0 || !e.is_floating_point()) {
      e.copy_(p);  // the first update, and counters (num_batches_tracked): the model's value
    } else {
      // decay * e + (1 - decay) * p: two rounded products, one rounded sum (no fused multiply-add)
      Tensor q = p * (1.0 - decay_);
      e.mul_(decay_);
      e.add_(q);
    }
  }
  ++n_averaged_;
}

}  // namespace tr::optim
