// The string-keyed layer registry: builds modules from TOML tables with shape inference. Each
// builder reads its hyperparameters from the table, checks the per-sample input shape it is
// given, and replaces it by its output shape (so a model file never states in_features).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>
#include "nn/module.h"
#include "util/toml_table.h"

namespace tr::nn {

// The per-sample shape (no batch dim) and dtype flowing between layers of a model file.
struct ShapeInfo {
  Shape shape;
  DType dtype = DType::F32;
  std::string str() const;
};

using LayerBuilder = std::function<ModulePtr(const TomlTable& args, ShapeInfo& io)>;

struct LayerType {
  LayerBuilder build;
  std::string doc;  // one line: the keys it takes
};

class LayerRegistry {
 public:
  static LayerRegistry& get();
  void add(const std::string& type, LayerBuilder b, std::string doc);
  // Builds the layer described by `t` ("type" selects the builder); unknown keys and types are
  // errors with the location and the known names.
  ModulePtr build(const TomlTable& t, ShapeInfo& io) const;
  std::vector<std::string> types() const;
  const std::map<std::string, LayerType>& all() const { return types_; }

 private:
  std::map<std::string, LayerType> types_;
};

struct LayerRegistrar {
  LayerRegistrar(const char* type, LayerBuilder b, const char* doc) { LayerRegistry::get().add(type, std::move(b), doc); }
};
#define TR_REGISTER_LAYER(TYPE, DOC, FN) \
  static ::tr::nn::LayerRegistrar TR_LAYER_CONCAT(tr_layer_registrar_, __LINE__)(TYPE, FN, DOC)
#define TR_LAYER_CONCAT2(a, b) a##b
#define TR_LAYER_CONCAT(a, b) TR_LAYER_CONCAT2(a, b)

// Errors raised while building a layer: "<file:line:col>: layer 3 (conv2d): <msg>".
[[noreturn]] void layer_error(const TomlTable& t, const std::string& msg);
// Checks that the input has `rank` dims; the message names the layer and both shapes.
void expect_rank(const TomlTable& t, const ShapeInfo& io, size_t rank, const char* layout);

}  // namespace tr::nn
