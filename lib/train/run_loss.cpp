// RunLoss: how a batch's output meets its targets for the registered loss of a run.
#include "train/run_loss.h"
#include "core/grad_mode.h"
#include "nn/losses/cross_entropy_loss.h"
#include "ops/ops.h"

namespace tr::train {

std::pair<Tensor, Tensor> RunLoss::operator()(const Tensor& output, const Tensor& target) const {
  if (!classification_) {
    Tensor out = output.dim() == target.dim() + 1 && output.size(-1) == 1 ? output.squeeze(-1) : output;
    return {(*loss_)(out, target.to(out.dtype())), Tensor()};
  }
  // classification: [B, C] vs [B]; language model: [B, T, V] vs [B, T] (flattened)
  Tensor lg = output.dim() > 2 ? output.reshape({-1, output.size(-1)}) : output;
  Tensor tg = target.reshape({-1});
  TR_CHECK(lg.size(0) == tg.size(0), "the model output ", output.sizes(), " does not match the targets ",
           target.sizes(), " (expected [batch, classes] logits, or [batch, T, vocab] for a language model)");
  // The fused cross entropy finds each row's argmax in its one pass over the logits; otherwise
  // (fusion off, no kernel, a loss with hooks) the metric takes its own argmax pass.
  Tensor loss, hits;
  auto* ce = dynamic_cast<nn::CrossEntropyLoss*>(loss_.get());
  if (ce && !ce->has_hooks() && !ce->activation_checkpointing()) {
    CrossEntropyOut o = ce->forward_scored(lg, tg);
    loss = o.loss;
    hits = o.correct;
  } else {
    loss = (*loss_)(lg, tg);
  }
  Tensor correct;
  {
    NoGradGuard ng;
    correct = sum(cast(hits.defined() ? hits : argmax(lg, 1) == tg, DType::I64));
  }
  return {loss, correct};
}

}  // namespace tr::train
