// Hugging Face's GPT2Config (the config.json beside a save_pretrained model.safetensors) and the GPT-2
// of a model file: written from the model on export, checked against the model on import. The
// shapes of the weights show every dimension but n_head, so config.json is the one place that says
// how the attention splits its heads.
#pragma once
#include <string>
#include <nlohmann/json.hpp>
#include "core/dtype.h"
#include "nn/module.h"

namespace tr::train::gpt2_hf {

// The GPT2Config fields a model file fixes.
struct Gpt2Dims {
  int64_t vocab_size = 0, n_positions = 0, n_embd = 0, n_layer = 0, n_head = 0;
  double layer_norm_epsilon = 1e-5;
  std::string activation_function = "gelu_new";  // HF's name of our gelu = "tanh"; "gelu" for "none"
  bool tie_word_embeddings = true;               // lm_head.weight tied to transformer.wte.weight
  double embd_pdrop = 0, attn_pdrop = 0, resid_pdrop = 0;
};

// Read from the model's modules: transformer.wte (an embedding), transformer.wpe, the blocks
// transformer.h.N (their attention's n_head, the MLP's gelu, the LayerNorms' eps) and the tie.
// `what` (the model file) names the model in errors, which say what GPT-2 needs that it lacks.
Gpt2Dims gpt2_dims(nn::Module& model, const std::string& what);

// config.json as GPT2LMHeadModel.save_pretrained writes it (model_type "gpt2", the architecture,
// the attention's scaling as ours computes it), with the weights' dtype.
nlohmann::json config_json(const Gpt2Dims& d, DType dtype);

// The config.json at `path` (HF's defaults, GPT2Config()'s, for keys it leaves out) against the
// model: n_head, n_layer, n_embd, vocab_size, n_positions, the activation, layer_norm_epsilon and the
// attention's scaling. Errors name the file, the key, both values and `what`.
void check_config_json(const std::string& path, const Gpt2Dims& model, const std::string& what);

}  // namespace tr::train::gpt2_hf
