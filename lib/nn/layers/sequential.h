// Containers: Sequential (children "0", "1", ... or named) and ModuleList (no forward).
#pragma once
#include "nn/module.h"

namespace tr::nn {

class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  // Appends under the next index ("0", "1", ...) or the given name.
  Sequential& push_back(ModulePtr m, const std::string& name = "");
  Tensor forward(const Tensor& x) override;
  size_t size() const { return named_children().size(); }
  ModulePtr operator[](size_t i) const { return named_children().at(i).second; }
};

class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  ModuleList& push_back(ModulePtr m);
  size_t size() const { return named_children().size(); }
  ModulePtr operator[](size_t i) const { return named_children().at(i).second; }
};

}  // namespace tr::nn
