// Which parameters of a model a rule means: by name glob, by the kind of module that owns them,
// by attribute name and by number of dims. [[optimizer.groups]] (optim/param_groups.h) and a model
// file's [[init]] rules (nn/init_rules.h) select with it.
//
//   match = ["*.bias", "h.*.attn.*"]   globs over dotted names ('*' matches dots too)
//   modules = ["linear", "layer_norm"]  layer types or torch class names, without case or '_'
//   param_names = ["weight"]            the owner's attribute name
//   min_dim = 2, max_dim = 1            the tensor's number of dims (nanoGPT decays dim >= 2 only)
//
// A parameter is selected when one of its names (a tied parameter has several) satisfies
// (`match` or `modules`; with neither given, any name qualifies) and `param_names`, and the
// tensor satisfies the dim bounds.
#pragma once
#include <optional>
#include <string>
#include <vector>
#include "nn/module.h"
#include "toml/toml_table.h"

namespace tr::nn {

struct ParamSelector {
  std::vector<std::string> match;
  std::vector<std::string> modules;
  std::vector<std::string> param_names;
  std::optional<int64_t> min_dim, max_dim;

  bool empty() const { return match.empty() && modules.empty() && param_names.empty() && !min_dim && !max_dim; }
  // The selector keys of `t` that are present (absent keys do not narrow the selection).
  static ParamSelector read(const TomlTable& t);
  // The keys read() takes, for a table's list of known keys.
  static const std::vector<std::string>& keys();
};

// One parameter tensor with each name it is reachable under, in named_parameters() order (the
// first name is the one named_parameters() lists).
struct ParamRef {
  struct Owner {
    std::string name;  // dotted: "transformer.wte.weight"
    std::string attr;  // the owner's attribute: "weight"
    std::string kind;  // normalize_kind of the owner's class name: "embedding"
  };
  Tensor t;
  std::vector<Owner> owners;
  const std::string& name() const { return owners.front().name; }
};

// Every distinct parameter of `m` (prefixed by `prefix`), with all its names.
std::vector<ParamRef> list_parameters(const Module& m, const std::string& prefix = "");
bool selects(const ParamSelector& s, const ParamRef& p);

// Checks a selector against a model: a `modules` name without wildcards that is neither a layer
// type nor a class name in the model is an error (with the nearest kind); a `match` glob that
// matches no name is returned as a warning. `what` names the rule in both.
std::vector<std::string> check_selector(const ParamSelector& s, const Module& m, const std::string& what);

// Module kinds compare case-insensitively and without underscores: "batch_norm2d", "BatchNorm2d"
// and "batchnorm2d" are one kind. This is that normal form.
std::string normalize_kind(const std::string& kind);
// fnmatch without FNM_PATHNAME / FNM_PERIOD: '*' and '?' match '.' like any other character.
bool glob_match(const std::string& pattern, const std::string& s);

}  // namespace tr::nn
