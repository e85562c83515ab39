// A tiny GPT-2 run config: models/gpt2_124m.toml's layout, names, tie and initialisation at vocab
// 256 (the fortunes' bytes), 2 blocks of 2 heads x 16, context 32; nanoGPT's optimizer groups and
// clipping. test_gpt2.cpp and test_cuda_runs.cpp train it.
#pragma once
#include <string>

namespace it {

inline const std::string kTinyGpt2 = R"(
[run]
seed = 0

[model]
input = [32]
input_dtype = "int64"

[[model.layers]]
type = "sequential"
name = "transformer"
layers = [
  { type = "embedding", name = "wte", num_embeddings = 256, embedding_dim = 32 },
  { type = "position_embedding", name = "wpe", block_size = 32 },
  { type = "dropout", name = "drop", p = 0.0 },
  { type = "repeat", name = "h", times = 2, layer = { type = "transformer_block", n_head = 2, gelu = "tanh" } },
  { type = "layer_norm", name = "ln_f" },
]

[[model.layers]]
type = "linear"
name = "lm_head"
out_features = 256
bias = false
tie = { weight = "transformer.wte.weight" }

[[model.init]]
modules = ["linear", "embedding", "position_embedding"]
param_names = ["weight"]
type = "normal"
std = 0.02

[[model.init]]
modules = ["linear"]
param_names = ["bias"]
type = "zeros"

[[model.init]]
match = ["*.c_proj.weight"]
type = "normal"
std = 0.02
residual_scaling = true

[data]
dataset = "text"
block_size = 32
batch_size = 8
eval_fraction = 0.1

[optimizer]
type = "adamw"
lr = 0.003
betas = [0.9, 0.95]
weight_decay = 0.1

[[optimizer.groups]]
name = "no_decay"
max_dim = 1
weight_decay = 0.0

[train]
steps = 24
log_every = 4
eval_every = 8
eval_batches = 2
grad_clip = { max_norm = 1.0 }

[checkpoint]
every = 8
every_epoch = false
)";

}  // namespace it
