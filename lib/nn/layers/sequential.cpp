#include "nn/layers/sequential.h"
#include "nn/layer_registry.h"
#include "nn/layers/batch_norm.h"
#include "nn/layers/linear.h"
#include "nn/layers/max_pool2d.h"
#include "nn/layers/relu.h"

namespace tr::nn {

Sequential& Sequential::push_back(ModulePtr m, const std::string& name) {
  add_child(name.empty() ? std::to_string(size()) : name, std::move(m));
  return *this;
}

// Runs of layers that one fused op computes with the same values, when none of them has hooks or
// is checkpointed: a Linear and a ReLU as linear_relu (the relu in the product's epilogue where the
// device fuses it); a BatchNorm2d, a ReLU and a MaxPool2d as batch_norm_relu_max_pool2d.
Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  const auto& layers = named_children();
  // layer i + k, when it exists, is a T without hooks and not checkpointed
  auto plain = [&]<typename T>(size_t i, size_t k, T*) -> T* {
    if (i + k >= layers.size()) return nullptr;
    Module& m = *layers[i + k].second;
    return m.has_hooks() || m.activation_checkpointing() ? nullptr : dynamic_cast<T*>(&m);
  };
  for (size_t i = 0; i < layers.size(); ++i) {
    if (Linear* lin = plain(i, 0, (Linear*)nullptr); lin && plain(i, 1, (ReLU*)nullptr)) {
      h = lin->forward_relu(h);
      ++i;
      continue;
    }
    if (BatchNorm2d* bn = plain(i, 0, (BatchNorm2d*)nullptr); bn && plain(i, 1, (ReLU*)nullptr)) {
      if (MaxPool2d* pool = plain(i, 2, (MaxPool2d*)nullptr)) {
        h = bn->forward_relu_max_pool(h, *pool);
        i += 2;
        continue;
      }
    }
    h = (*layers[i].second)(h);
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
