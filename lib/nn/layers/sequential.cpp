#include "nn/layers/sequential.h"
#include "nn/layer_registry.h"
#include "nn/layers/linear.h"
#include "nn/layers/relu.h"

namespace tr::nn {

Sequential& Sequential::push_back(ModulePtr m, const std::string& name) {
  add_child(name.empty() ? std::to_string(size()) : name, std::move(m));
  return *this;
}

// A Linear followed by a ReLU, neither with hooks nor checkpointed, runs as one linear_relu (same
// values; the relu in the product's epilogue where the device fuses it).
Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  const auto& layers = named_children();
  auto plain = [](const Module& m) { return !m.has_hooks() && !m.activation_checkpointing(); };
  for (size_t i = 0; i < layers.size(); ++i) {
    Module& m = *layers[i].second;
    auto* lin = dynamic_cast<Linear*>(&m);
    if (lin != nullptr && i + 1 < layers.size() && plain(m) &&
        dynamic_cast<ReLU*>(layers[i + 1].second.get()) != nullptr && plain(*layers[i + 1].second)) {
      h = lin->forward_relu(h);
      ++i;
      continue;
    }
    h = m(h);
  }
  return h;
}

ModuleList& ModuleList::push_back(ModulePtr m) {
  add_child(std::to_string(size()), std::move(m));
  return *this;
}

// Builds the layers of `t.layers` in order into a Sequential, threading the shape through.
ModulePtr build_sequential(const TomlTable& t, ShapeInfo& io) {
  auto seq = std::make_shared<Sequential>();
  auto layers = t.get_tables("layers");
  for (size_t i = 0; i < layers.size(); ++i) {
    TomlTable l(layers[i].raw(), t.file(),
                str(t.what() == "model" ? "" : t.what() + " ", "layer ", i, " (",
                    layers[i].raw()["type"].value_or(std::string("?")), ")"));
    ModulePtr m = build_layer(l, io);
    seq->push_back(m, l.get_string("name", ""));
  }
  return seq;
}

TR_REGISTER_LAYER("sequential", "layers = [...]", build_sequential);

}  // namespace tr::nn
