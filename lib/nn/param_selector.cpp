#include "nn/param_selector.h"
#include <fnmatch.h>
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include "nn/layer_registry.h"

namespace tr::nn {

namespace {

bool has_wildcard(const std::string& p) { return p.find_first_of("*?[") != std::string::npos; }

bool any_match(const std::vector<std::string>& globs, const std::string& s) {
  return std::any_of(globs.begin(), globs.end(), [&](const std::string& g) { return glob_match(g, s); });
}

void collect(const Module& m, const std::string& prefix, std::map<TensorImpl*, size_t>& index,
             std::vector<ParamRef>& out, std::set<std::string>* kinds) {
  const std::string kind = normalize_kind(m.type_name());
  if (kinds) kinds->insert(kind);
  for (auto& [n, t] : m.named_parameters(false)) {
    auto [it, fresh] = index.emplace(t.impl(), out.size());
    if (fresh) out.push_back({t, {}});
    out[it->second].owners.push_back({prefix + n, n, kind});
  }
  for (auto& [n, c] : m.named_children())
    if (c) collect(*c, prefix + n + ".", index, out, kinds);
}

}  // namespace

bool glob_match(const std::string& pattern, const std::string& s) {
  return fnmatch(pattern.c_str(), s.c_str(), 0) == 0;
}

std::string normalize_kind(const std::string& kind) {
  std::string r;
  for (char c : kind)
    if (c != '_') r += char(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

const std::vector<std::string>& ParamSelector::keys() {
  static const std::vector<std::string> k{"match", "modules", "param_names", "min_dim", "max_dim"};
  return k;
}

ParamSelector ParamSelector::read(const TomlTable& t) {
  ParamSelector s;
  if (t.has("match")) s.match = t.get_strings("match");
  if (t.has("modules")) s.modules = t.get_strings("modules");
  if (t.has("param_names")) s.param_names = t.get_strings("param_names");
  if (t.has("min_dim")) s.min_dim = t.get_int("min_dim");
  if (t.has("max_dim")) s.max_dim = t.get_int("max_dim");
  if (s.min_dim && *s.min_dim < 0) t.fail("min_dim", str("must be at least 0, got ", *s.min_dim));
  if (s.max_dim && *s.max_dim < 0) t.fail("max_dim", str("must be at least 0, got ", *s.max_dim));
  return s;
}

std::vector<ParamRef> list_parameters(const Module& m, const std::string& prefix) {
  std::map<TensorImpl*, size_t> index;
  std::vector<ParamRef> out;
  collect(m, prefix, index, out, nullptr);
  return out;
}

bool selects(const ParamSelector& s, const ParamRef& p) {
  const int64_t d = p.t.dim();
  if ((s.min_dim && d < *s.min_dim) || (s.max_dim && d > *s.max_dim)) return false;
  for (const auto& o : p.owners) {
    bool by_module = false;
    for (auto& k : s.modules) by_module = by_module || glob_match(normalize_kind(k), o.kind);
    const bool chosen = (s.match.empty() && s.modules.empty()) || any_match(s.match, o.name) || by_module;
    const bool attr_ok =
        s.param_names.empty() || std::find(s.param_names.begin(), s.param_names.end(), o.attr) != s.param_names.end();
    if (chosen && attr_ok) return true;
  }
  return false;
}

std::vector<std::string> check_selector(const ParamSelector& s, const Module& m, const std::string& what) {
  std::map<TensorImpl*, size_t> index;
  std::vector<ParamRef> params;
  std::set<std::string> kinds;  // normalized kinds of the model's modules and every layer type
  collect(m, "", index, params, &kinds);
  for (auto& t : Registry<LayerType>::get().names()) kinds.insert(normalize_kind(t));
  const std::vector<std::string> kind_list(kinds.begin(), kinds.end());
  for (auto& k : s.modules) {
    if (has_wildcard(k) || kinds.count(normalize_kind(k))) continue;
    const std::string near = nearest_name(normalize_kind(k), kind_list);
    throw Error(str(what, ": unknown module kind '", k, "'", near.empty() ? "" : "; did you mean '" + near + "'?",
                    " (layer types and class names compare without case and underscores)"));
  }
  std::vector<std::string> warnings;
  for (auto& g : s.match) {
    const bool hit = std::any_of(params.begin(), params.end(), [&](const ParamRef& p) {
      return std::any_of(p.owners.begin(), p.owners.end(),
                         [&](const ParamRef::Owner& o) { return glob_match(g, o.name); });
    });
    if (!hit) warnings.push_back(str(what, ": match pattern '", g, "' matches no parameter of the model"));
  }
  return warnings;
}

}  // namespace tr::nn
