#include "nn/layer_registry.h"
#include "nn/init_rules.h"

namespace tr::nn {

std::string ShapeInfo::str() const {
  std::string s = tr::str(shape);
  if (dtype != DType::F32) s += std::string(" ") + dtype_name(dtype);
  return s;
}

namespace {
thread_local TieCollector* active_collector = nullptr;  // the model being built on this thread
}

TieCollector::TieCollector() : outer_(active_collector) { active_collector = this; }
TieCollector::~TieCollector() { active_collector = outer_; }
TieCollector* TieCollector::active() { return active_collector; }

namespace {

// `tie = { <own parameter (dotted within the layer)> = "<model parameter>" }`
void request_ties(const TomlTable& t, Module& m) {
  const auto tie = t.get_table("tie");
  if (!tie) return;
  TieCollector* c = TieCollector::active();
  if (!c) t.fail("tie", "ties a parameter to another of the model, so it needs a model (model file or [model])");
  for (const auto& [k, v] : tie->raw()) {
    const std::string own(k.str());
    const std::string target = tie->get_string(own);
    const size_t dot = own.rfind('.');
    Module* owner = &m;
    if (dot != std::string::npos) {
      try {
        owner = m.get_submodule(own.substr(0, dot)).get();
      } catch (const Error& e) { tie->fail(own, str("names no parameter of this layer: ", e.what())); }
    }
    const std::string param = dot == std::string::npos ? own : own.substr(dot + 1);
    bool found = false;
    for (auto& [n, p] : owner->named_parameters(false)) found = found || n == param;
    if (!found) {
      std::string names;
      for (auto& [n, p] : m.named_parameters()) names += (names.empty() ? "" : ", ") + n;
      tie->fail(own, str("names no parameter of this layer (its parameters: ", names.empty() ? "none" : names, ")"));
    }
    c->ties.push_back({owner, param, target, str(tie->location(), ": ", t.what())});
  }
}

}  // namespace

ModulePtr build_layer(const TomlTable& t, ShapeInfo& io) {
  const LayerType& type = t.get_registered<LayerType>("type");
  // read before the build so that a bad value is the first error; a default is not recorded
  const bool checkpoint = t.has("checkpoint") && t.get_bool("checkpoint", false);
  const std::vector<InitRule> init = t.has("init") ? parse_init_rules(t, "init", false) : std::vector<InitRule>{};
  ModulePtr m = type.build(t, io);
  apply_init_rules(*m, init);
  request_ties(t, *m);
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
