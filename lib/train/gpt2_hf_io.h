// Hugging Face GPT-2 directories in and out: [model] init_format = "gpt2_hf" reads one into a GPT-2
// model file's model, `trainer export --format gpt2_hf` writes one that
// GPT2LMHeadModel.from_pretrained loads (model.safetensors in HF's layout and config.json). The
// tensor mapping is gpt2_hf_format.h's, the config gpt2_hf_config.h's.
#pragma once
#include <string>
#include "io/safetensors.h"
#include "nn/module.h"
#include "train/gpt2_hf_config.h"

namespace tr::train::gpt2_hf {

// The tensors of `path` (a save_pretrained directory or its model.safetensors) under the model's
// names and in its layout, ready for load_state_dict. A config.json beside the weights is checked
// against the model first (n_head shows in no shape). `what` (the model file) names the model in errors.
io::NamedTensorList load_weights(const std::string& path, nn::Module& model, const std::string& what);

// The model as save_pretrained(out, safe_serialization=True) writes it: out/model.safetensors
// (metadata {"format": "pt"}) and out/config.json; only the weights when `out` ends in ".safetensors".
// Returns the config's dimensions.
Gpt2Dims save_pretrained(nn::Module& model, const std::string& out, const std::string& what);

// `trainer export CHECKPOINT OUT --format gpt2_hf [--ema]`: the model is built from the run's
// resolved config (runs/<name>/config.toml, two levels above runs/<name>/checkpoints/step_<N>) and
// the model file it names, loaded with the checkpoint's weights (or its EMA weights) and saved as
// save_pretrained does.
void export_checkpoint(const std::string& checkpoint, const std::string& out, bool ema);

}  // namespace tr::train::gpt2_hf
