#include "nn/layer_registry.h"

namespace tr::nn {

std::string ShapeInfo::str() const {
  std::string s = tr::str(shape);
  if (dtype != DType::F32) s += std::string(" ") + dtype_name(dtype);
  return s;
}

LayerRegistry& LayerRegistry::get() {
  static LayerRegistry r;
  return r;
}

void LayerRegistry::add(const std::string& type, LayerBuilder b, std::string doc) {
  types_[type] = {std::move(b), std::move(doc)};
}

std::vector<std::string> LayerRegistry::types() const {
  std::vector<std::string> r;
  for (auto& [k, v] : types_) r.push_back(k);
  return r;
}

ModulePtr LayerRegistry::build(const TomlTable& t, ShapeInfo& io) const {
  std::string type = t.get_string("type");
  auto it = types_.find(type);
  if (it == types_.end()) {
    std::string near = nearest_name(type, types());
    t.fail("type", str("is an unknown layer type '", type, "'", near.empty() ? "" : "; did you mean '" + near + "'?",
                       " (known types: ", types(), ")"));
  }
  ModulePtr m = it->second.build(t, io);
  t.finish({"name"});
  return m;
}

void layer_error(const TomlTable& t, const std::string& msg) {
  throw Error(str(t.location(), ": ", t.what(), ": ", msg));
}

void expect_rank(const TomlTable& t, const ShapeInfo& io, size_t rank, const char* layout) {
  if (io.shape.size() != rank)
    layer_error(t, str("expects a per-sample input of shape ", layout, ", but the previous layer gives ", io.str()));
}

}  // namespace tr::nn
