// Hugging Face's GPT2LMHeadModel weights (save_pretrained's model.safetensors) <-> the state_dict of
// the GPT-2 model files (models/gpt2_*.toml: nanoGPT's names). HF's names are nanoGPT's, but its
// attention and MLP projections are Conv1D modules, whose weight is stored [in, out] where our
// Linear's is [out, in] (nanoGPT's from_pretrained transposes the same four), its file leaves out
// lm_head.weight (tied to transformer.wte.weight), and files of older versions carry the causal-mask
// buffers attn.bias and attn.masked_bias, which hold no weights. One table of rules (the .cpp) says
// which of these each tensor is; both directions read it.
#pragma once
#include <string>
#include "io/safetensors.h"
#include "nn/module.h"

namespace tr::train::gpt2_hf {

// HF's tensors -> the model's state_dict names and layout: "transformer." added to the names of a
// file saved from GPT2Model (OpenAI's file on the Hub: "h.0.attn.c_attn.weight", "wte.weight"),
// Conv1D weights transposed, the mask buffers dropped. lm_head.weight follows the model's tie: when
// the model ties it to transformer.wte.weight, a copy in the file must equal the embedding and is
// dropped; when the model has a head of its own and the file none, the head is the embedding (HF's
// tie_word_embeddings). Each shape is checked against `model`; errors name `file`, the tensor, both
// shapes and what to change. A name that is not GPT2LMHeadModel's is an error.
io::NamedTensorList from_hf(io::NamedTensorList tensors, const std::string& file, const nn::Module& model);

// The model's state_dict as save_pretrained writes it: the tie's alias (lm_head.weight) left out,
// Conv1D weights transposed back to [in, out], every tensor contiguous. Errors name a tensor that
// GPT2LMHeadModel has no place for, one it needs that the model lacks, and a tie it cannot express.
io::NamedTensorList to_hf(const nn::Module& model);

}  // namespace tr::train::gpt2_hf
