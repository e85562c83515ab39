// The string-keyed layer registry: builds modules from TOML tables with shape inference. Each
// builder reads its hyperparameters from the table, checks the per-sample input shape it is
// given, and replaces it by its output shape (so a model file never states in_features).
#pragma once
#include <functional>
#include <string>
#include <vector>
#include "nn/module.h"
#include "toml/toml_table.h"

namespace tr::nn {

// The per-sample shape (no batch dim) and dtype flowing between layers of a model file.
struct ShapeInfo {
  Shape shape;
  DType dtype = DType::F32;
  std::string str() const;
};

using LayerBuilder = std::function<ModulePtr(const TomlTable& args, ShapeInfo& io)>;

// A layer type of model files: Registry<LayerType>, keyed by the `type` a layer table names.
struct LayerType {
  LayerBuilder build;
  std::string doc;  // one line: the keys it takes
  // `checkpoint = true` checkpoints each child of the built module rather than the module itself
  // (repeat: one checkpoint per copy, as torch users checkpoint each block).
  bool checkpoint_each_child = false;

  static constexpr const char* kRegistryKind = "layer type";
};

// Builds the layer described by `t` ("type" selects the builder); unknown keys and types are
// errors with the location and the known names. Every layer also takes `name` (its state_dict
// name in a container), `checkpoint = true` (activation checkpointing, nn/activation_checkpoint.h),
// `init = [...]` (rules over its own parameters' names, nn/init_rules.h) and
// `tie = { weight = "transformer.wte.weight" }` (its parameter becomes the model's tensor of that
// name: one tensor under two names; resolved by build_model once every layer exists).
ModulePtr build_layer(const TomlTable& t, ShapeInfo& io);

// A `tie` a layer asked for while a model builds.
struct PendingTie {
  Module* owner;       // the module that owns `param` (the layer, or a submodule of it)
  std::string param;   // its own parameter name
  std::string target;  // the dotted name of the model's parameter it becomes
  std::string where;   // "<file:line:col>: layer 5 (linear)", for messages
};
// Collects the ties of the layers built while it lives (build_model holds one); build_layer
// outside a model build refuses `tie`.
class TieCollector {
 public:
  TieCollector();
  ~TieCollector();
  TieCollector(const TieCollector&) = delete;
  TieCollector& operator=(const TieCollector&) = delete;
  std::vector<PendingTie> ties;
  static TieCollector* active();

 private:
  TieCollector* outer_;
};

#define TR_REGISTER_LAYER(TYPE, DOC, FN)                                                                       \
  static const ::tr::Registrar<::tr::nn::LayerType> TR_REGISTRY_CONCAT(tr_layer_registrar_, __COUNTER__)(TYPE, \
                                                                                                         {FN, DOC})
// A container whose `checkpoint = true` applies to each of its children (LayerType::checkpoint_each_child).
#define TR_REGISTER_CONTAINER_LAYER(TYPE, DOC, FN)                                                        \
  static const ::tr::Registrar<::tr::nn::LayerType> TR_REGISTRY_CONCAT(tr_layer_registrar_, __COUNTER__)( \
      TYPE, {FN, DOC, true})

// Errors raised while building a layer: "<file:line:col>: layer 3 (conv2d): <msg>".
[[noreturn]] void layer_error(const TomlTable& t, const std::string& msg);
// Checks that the per-sample input is floating point (activations, norms).
void expect_floating(const TomlTable& t, const ShapeInfo& io);
// Checks that the input has `rank` dims; the message names the layer and both shapes.
void expect_rank(const TomlTable& t, const ShapeInfo& io, size_t rank, const char* layout);

}  // namespace tr::nn
