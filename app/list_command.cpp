// `trainer list [kind]`: every registered name of a kind (all kinds without one) with its keys.
#include <algorithm>
#include <cstdio>
#include <functional>
#include "app/commands.h"
#include "config/run_config.h"
#include "core/error.h"
#include "core/registry.h"
#include "data/dataset_registry.h"
#include "data/transforms.h"
#include "nn/layer_registry.h"
#include "nn/loss.h"
#include "ops/registry.h"
#include "optim/optimizer_registry.h"
#include "optim/scheduler_registry.h"

namespace tr::app {

namespace {

// One line about an op for `trainer list ops`: arity, kernels, autograd and autocast.
std::string describe_op(const OpDef& d) {
  std::string s = d.num_inputs < 0 ? "variadic" : str(d.num_inputs, d.num_inputs == 1 ? " input" : " inputs");
  if (d.kind == OpKind::View) s += ", view";
  std::string kernels;
  if (d.kernels[int(DeviceType::CPU)]) kernels += "cpu";
  if (d.kernels[int(DeviceType::CUDA)]) kernels += kernels.empty() ? "cuda" : " cuda";
  if (!kernels.empty()) s += ", kernels: " + kernels;
  s += d.backward ? ", differentiable" : d.differentiable ? ", no backward" : ", not differentiable";
  if (d.autocast == amp::CastPolicy::LowerPrecision) s += ", autocast: lower precision";
  if (d.autocast == amp::CastPolicy::Fp32) s += ", autocast: f32";
  if (d.autocast == amp::CastPolicy::Promote) s += ", autocast: promote";
  return s;
}

using ListEntries = std::vector<std::pair<std::string, std::string>>;  // name, doc line

template <typename T, typename Doc> ListEntries entries_of(Doc doc) {
  ListEntries r;
  for (const auto& [name, e] : Registry<T>::get().all()) r.emplace_back(name, doc(e));
  return r;
}

// A kind `trainer list` prints: its name, the section or key that names it, and its entries.
struct Kind {
  const char* name;
  const char* where;
  std::function<ListEntries()> entries;
};

// Every kind, in the order `trainer list` prints them; a new kind is one more line.
const std::vector<Kind>& kinds() {
  static const std::vector<Kind> k = {
      {"layers", "model files: [[layers]] type",
       [] { return entries_of<nn::LayerType>([](auto& e) { return e.doc; }); }},
      {"ops", "the core's op registry, not named by configs", [] { return entries_of<OpDef>(describe_op); }},
      {"optimizers", "[optimizer] type",
       [] { return entries_of<optim::OptimizerType>([](auto& e) { return e.doc(); }); }},
      {"schedulers", "[scheduler] type",
       [] { return entries_of<optim::SchedulerType>([](auto& e) { return e.doc; }); }},
      {"datasets", "[data] dataset", [] { return entries_of<data::DatasetType>([](auto& e) { return e.doc; }); }},
      {"transforms", "[data] transforms = [{type = ...}]",
       [] { return entries_of<data::TransformType>([](auto& e) { return e.doc; }); }},
      {"losses", "[loss] type", [] { return entries_of<nn::LossType>([](auto& e) { return e.doc; }); }},
      {"keys", "the run config's fixed keys: section.key, type = default, what it is",
       [] { return config::key_list_entries(); }},
  };
  return k;
}

std::vector<std::string> kind_names() {
  std::vector<std::string> names;
  for (const Kind& k : kinds()) names.push_back(k.name);
  return names;
}

}  // namespace

void ListCommand::add_to(CLI::App& app) {
  std::string names;
  for (const std::string& n : kind_names()) names += (names.empty() ? "" : ", ") + n;
  auto* c = app.add_subcommand("list", "print every registered name of a kind with the keys it takes");
  c->add_option("kind", kind, names + " (default: all)");
  c->callback([this] { execute(); });
}

void ListCommand::execute() const {
  const std::vector<std::string> names = kind_names();
  if (!kind.empty() && std::find(names.begin(), names.end(), kind) == names.end()) {
    const std::string near = nearest_name(kind, names);
    throw Error(str("trainer list: unknown kind '", kind, "'", near.empty() ? "" : "; did you mean '" + near + "'?",
                    " (known: ", names, ")"));
  }
  bool first = true;
  for (const Kind& k : kinds()) {
    if (!kind.empty() && kind != k.name) continue;
    std::printf("%s%s (%s):\n", first ? "" : "\n", k.name, k.where);
    first = false;
    for (const auto& [name, doc] : k.entries()) std::printf("  %-24s %s\n", name.c_str(), doc.c_str());
  }
}

}  // namespace tr::app
