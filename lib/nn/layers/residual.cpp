#include "nn/layers/residual.h"
#include "nn/layer_registry.h"
#include "nn/layers/sequential.h"
#include "ops/ops.h"

namespace tr::nn {

Residual::Residual(ModulePtr body_, ModulePtr shortcut_, ModulePtr activation_)
    : Module("Residual"), body(std::move(body_)), shortcut(std::move(shortcut_)), activation(std::move(activation_)) {
  TR_CHECK(body, "Residual: the body must not be null");
  register_module("body", body);
  if (shortcut) register_module("shortcut", shortcut);
  if (activation) register_module("activation", activation);
}

Tensor Residual::forward(const Tensor& x) {
  Tensor b = (*body)(x);
  Tensor s = shortcut ? (*shortcut)(x) : x;
  TR_CHECK(b.sizes() == s.sizes(), "Residual: the body's output shape ", b.sizes(), " does not equal the ",
           shortcut ? "shortcut's output shape " : "input shape (identity shortcut) ", s.sizes());
  Tensor y = b + s;
  return activation ? (*activation)(y) : y;
}

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

// `activation = "relu"` (a layer type without keys), `{type = "gelu", approximate = "tanh"}` (any
// layer) or "none": a layer from the registry, applied to the sum; it must keep the shape.
ModulePtr build_activation(const TomlTable& t, const ShapeInfo& io) {
  if (!t.has("activation")) return nullptr;
  toml::table spec;  // the string form as the table {type = "..."}
  if (const auto table = t.node("activation")->is_table() ? t.get_table("activation") : std::nullopt) {
    spec = table->raw();
  } else {
    if (t.get_string("activation") == "none") return nullptr;
    // an unknown name is reported at this key, with the nearest layer type and the known ones
    spec.insert("type", t.get_string("activation"));
    (void)t.get_registered<LayerType>("activation");
  }
  TomlTable a(spec, t.file(), str(t.what(), " activation (", spec["type"].value_or(std::string("?")), ")"));
  ShapeInfo after = io;
  ModulePtr m = build_layer(a, after);
  if (after.shape != io.shape || after.dtype != io.dtype)
    layer_error(t, str("the activation changes the shape ", io.str(), " to ", after.str(), "; it must keep it"));
  return m;
}

ModulePtr build_residual(const TomlTable& t, ShapeInfo& io) {
  ShapeInfo in = io;
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
  return std::make_shared<Residual>(body, shortcut, build_activation(t, io));
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
    TomlTable l(one->raw(), t.file(),
                str(t.what(), " copy ", i, " (", one->raw()["type"].value_or(std::string("?")), ")"));
    seq->push_back(build_layer(l, io));
  }
  return seq;
}

}  // namespace

TR_REGISTER_LAYER(
    "residual",
    "layers = [...] (the body), shortcut = [...] (default identity), activation = \"none\" (a layer type, "
    "or a layer {type = ...}, applied to the sum)",
    build_residual);
// checkpoint = true on a repeat checkpoints each copy (one checkpoint per block, as torch users do)
TR_REGISTER_CONTAINER_LAYER("repeat",
                            "times = N, layers = [...] or layer = {...}: N fresh copies as children \"0\"..\"N-1\" "
                            "(a Sequential of the list, or the layer itself); checkpoint = true checkpoints each copy",
                            build_repeat);

}  // namespace tr::nn
