#include "nn/layer_registry.h"

namespace tr::nn {

std::string ShapeInfo::str() const {
  std::string s = tr::str(shape);
  if (dtype != DType::F32) s += std::string(" ") + dtype_name(dtype);
  return s;
}

ModulePtr build_layer(const TomlTable& t, ShapeInfo& io) {
  const LayerType& type = t.get_registered<LayerType>("type");
  // read before the build so that a bad value is the first error; a default is not recorded
  const bool checkpoint = t.has("checkpoint") && t.get_bool("checkpoint", false);
  ModulePtr m = type.build(t, io);
  t.finish({"name"});
  if (checkpoint) {
    if (type.checkpoint_each_child)
      for (auto& [name, child] : m->named_children()) child->set_activation_checkpointing(true);
    else
      m->set_activation_checkpointing(true);
  }
  return m;
}

void layer_error(const TomlTable& t, const std::string& msg) {
  throw Error(str(t.location(), ": ", t.what(), ": ", msg));
}

void expect_floating(const TomlTable& t, const ShapeInfo& io) {
  if (!is_floating(io.dtype)) layer_error(t, str("expects a floating point input, got ", io.str()));
}

void expect_rank(const TomlTable& t, const ShapeInfo& io, size_t rank, const char* layout) {
  if (io.shape.size() != rank)
    layer_error(t, str("expects a per-sample input of shape ", layout, ", but the previous layer gives ", io.str()));
}

}  // namespace tr::nn
