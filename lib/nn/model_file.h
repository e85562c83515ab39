// Model files: a TOML layer graph with shape inference (the format: docs/model_files.md).
//   input = [1, 28, 28]        # per-sample shape (no batch dim)
//   input_dtype = "float32"     # "int64" for token ids
//   [[layers]]
//   type = "conv2d"
//   out_channels = 32
//   ...
// Any layer may say `checkpoint = true` (activation checkpointing: its activations are recomputed in
// backward; on a `repeat`, each copy is checkpointed), `name = "..."`, `init = [...]` and
// `tie = {...}` (nn/layer_registry.h). The model's `[[init]]` rules (nn/init_rules.h) run after
// every layer is built and tied.
// The model is a Sequential of the layers (state_dict keys "0.weight", "1.running_mean", ...,
// or the layer's `name`), exactly the keys of the equivalent torch.nn.Sequential.
#pragma once
#include <string>
#include <vector>
#include "nn/layer_registry.h"
#include "nn/layers/sequential.h"

namespace tr::nn {

struct LayerSummary {
  std::string path;    // dotted name in the model ("3", "4.body.0")
  std::string type;    // torch class name
  std::string repr;    // extra_repr
  Shape output;        // per-sample output shape
  int64_t params = 0;  // parameters owned directly (not by children), tied ones not counted
  std::string tied;    // "weight = transformer.wte.weight" for a parameter tied to another
};

struct Model {
  std::shared_ptr<Sequential> net;
  ShapeInfo input;   // per-sample input
  ShapeInfo output;  // per-sample output
  std::vector<LayerSummary> layers;
};

// Builds from a TOML table holding `input`, `input_dtype` and `layers`; `file` names it in errors.
Model build_model(const TomlTable& t);
Model load_model_file(const std::string& path);
// The summary table: each layer with its output shape and parameter count, and the totals.
std::string model_summary(const Model& m);

}  // namespace tr::nn
