#include "nn/layers/residual.h"
#include <algorithm>
#include "nn/layer_registry.h"
#include "nn/layers/sequential.h"
#include "ops/ops.h"

namespace tr::nn {

const std::vector<std::string>& Residual::activations() {
  static const std::vector<std::string> a{"none", "relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid"};
  return a;
}

Residual::Residual(ModulePtr body_, ModulePtr shortcut_, std::string activation_)
    : Module("Residual"), body(std::move(body_)), shortcut(std::move(shortcut_)), activation(std::move(activation_)) {
  TR_CHECK(body, "Residual: the body must not be null");
  const auto& a = activations();
  TR_CHECK(std::find(a.begin(), a.end(), activation) != a.end(), "Residual: unknown activation '", activation,
           "' (known: ", a, ")");
  register_module("body", body);
  if (shortcut) register_module("shortcut", shortcut);
}

Tensor Residual::forward(const Tensor& x) {
  Tensor b = (*body)(x);
  Tensor s = shortcut ? (*shortcut)(x) : x;
  TR_CHECK(b.sizes() == s.sizes(), "Residual: the body's output shape ", b.sizes(), " does not equal the ",
           shortcut ? "shortcut's output shape " : "input shape (identity shortcut) ", s.sizes());
  Tensor y = b + s;
  if (activation == "relu") return relu(y);
  if (activation == "gelu") return gelu(y);
  if (activation == "gelu_tanh") return gelu(y, "tanh");
  if (activation == "silu") return silu(y);
  if (activation == "tanh") return tr::tanh(y);
  if (activation == "sigmoid") return sigmoid(y);
  return y;
}

std::string Residual::extra_repr() const { return activation == "none" ? "" : "activation=" + activation; }

namespace {

// Builds the layer list `t.<key>` into a Sequential, threading the shape through; layers are named
// "<table> <label> layer i (type)" in messages.
std::shared_ptr<Sequential> build_list(const TomlTable& t, const std::string& key, const std::string& label,
                                       ShapeInfo& io) {
  auto seq = std::make_shared<Sequential>();
  auto layers = t.get_tables(key);
  for (size_t i = 0; i < layers.size(); ++i) {
    TomlTable l(layers[i].raw(), t.file(),
                str(t.what(), " ", label, " layer ", i, " (", layers[i].raw()["type"].value_or(std::string("?")), ")"));
    ModulePtr m = build_layer(l, io);
    seq->push_back(m, l.get_string("name", ""));
  }
  return seq;
}

ModulePtr build_residual(const TomlTable& t, ShapeInfo& io) {
  ShapeInfo in = io;
  std::string act = t.get_choice("activation", Residual::activations(), "none");
  ShapeInfo body_io = in;
  auto body = build_list(t, "layers", "body", body_io);
  ShapeInfo short_io = in;
  std::shared_ptr<Sequential> shortcut;
  if (t.has("shortcut")) shortcut = build_list(t, "shortcut", "shortcut", short_io);
  if (body_io.shape != short_io.shape || body_io.dtype != short_io.dtype)
    layer_error(t, str("the body's output shape ", body_io.str(), " does not equal the ",
                       shortcut ? "shortcut's output shape " : "identity shortcut's shape (the input shape) ",
                       short_io.str(), "; the two are added"));
  io = body_io;
  return std::make_shared<Residual>(body, shortcut, act);
}

// `layers = [...]`: each copy a Sequential of the list ("h.0.0.ln_1.weight"); `layer = {...}`: each
// copy the layer itself, as a torch ModuleList of blocks ("h.0.ln_1.weight", nanoGPT's names).
ModulePtr build_repeat(const TomlTable& t, ShapeInfo& io) {
  int64_t n = t.get_int("times");
  if (n < 1) t.fail("times", str("must be at least 1, got ", n));
  const auto one = t.get_table("layer");
  if (one && t.has("layers")) t.fail("layer", "and layers are two ways to say what is repeated: give one");
  auto seq = std::make_shared<Sequential>();
  for (int64_t i = 0; i < n; ++i) {
    if (!one) {
      seq->push_back(build_list(t, "layers", str("copy ", i), io));
      continue;
    }
    TomlTable l(one->raw(), t.file(), str(t.what(), " copy ", i, " (", one->raw()["type"].value_or(std::string("?")), ")"));
    seq->push_back(build_layer(l, io));
  }
  return seq;
}

}  // namespace

TR_REGISTER_LAYER("residual", "layers = [...] (the body), shortcut = [...] (default identity), activation = \"none\"",
                  build_residual);
// checkpoint = true on a repeat checkpoints each copy (one checkpoint per block, as torch users do)
TR_REGISTER_CONTAINER_LAYER("repeat",
                            "times = N, layers = [...] or layer = {...}: N fresh copies as children \"0\"..\"N-1\" "
                            "(a Sequential of the list, or the layer itself); checkpoint = true checkpoints each copy",
                            build_repeat);

}  // namespace tr::nn
