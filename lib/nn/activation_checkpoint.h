// Activation checkpointing (torch.utils.checkpoint, use_reentrant=True): a module's forward runs
// without keeping its activations, and one graph node recomputes them during backward. The
// recomputation replays the forward's random numbers and autocast state and leaves buffers as the
// forward left them, so losses, gradients, buffers and the generator state are bit-identical to a
// run without checkpointing; only memory (less) and time (one more forward per module) change.
#pragma once
#include <string>
#include <vector>
#include "nn/module.h"

namespace tr::nn {

// The call of a module whose activation checkpointing is on (Module::operator() calls it after the
// pre-hooks). With grad mode on and an input or a parameter of `m` that requires grad, runs m's
// forward without recording and returns its output attached to a CheckpointBackward node whose
// edges lead to the inputs and the parameters; otherwise (no_grad, nothing to differentiate) runs
// the forward as usual.
Tensor checkpoint_forward(Module& m, const std::vector<Tensor>& inputs);

// [model] activation_checkpointing: "none", or "blocks" (every TransformerBlock of the model).
const std::vector<std::string>& activation_checkpointing_policies();
// Turns checkpointing on for the modules the policy names; returns how many. "blocks" on a model
// without a TransformerBlock is an error that starts with `where` (the config that asked).
int64_t apply_activation_checkpointing(Module& root, const std::string& policy, const std::string& where);

}  // namespace tr::nn
