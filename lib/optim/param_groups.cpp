#include "optim/param_groups.h"
#include <fnmatch.h>
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include "nn/layer_registry.h"
#include "optim/optimizer_registry.h"
#include "toml/toml_table.h"

namespace tr::optim {

namespace {

// fnmatch without FNM_PATHNAME / FNM_PERIOD: '*' and '?' match '.' like any other character.
bool glob_match(const std::string& pattern, const std::string& s) {
  return fnmatch(pattern.c_str(), s.c_str(), 0) == 0;
}

bool has_wildcard(const std::string& p) { return p.find_first_of("*?[") != std::string::npos; }

struct NamedParam {
  std::string name;   // dotted, as named_parameters()
  std::string attr;   // the owner's attribute name ("weight")
  std::string kind;   // normalize_kind of the owner's class name
  Tensor t;
};

// Every parameter with its owner, in named_parameters() order (own parameters, then children);
// a parameter shared by two modules is listed once, under its first name (as torch).
void collect(const nn::Module& m, const std::string& prefix, std::set<TensorImpl*>& seen,
             std::vector<NamedParam>& out, std::set<std::string>& kinds) {
  std::string kind = normalize_kind(m.type_name());
  kinds.insert(kind);
  for (auto& [n, t] : m.named_parameters(false))
    if (seen.insert(t.impl()).second) out.push_back({prefix + n, n, kind, t});
  for (auto& [n, c] : m.named_children())
    if (c) collect(*c, prefix + n + ".", seen, out, kinds);
}

bool any_match(const std::vector<std::string>& globs, const std::string& s) {
  return std::any_of(globs.begin(), globs.end(), [&](const std::string& g) { return glob_match(g, s); });
}

bool rule_selects(const GroupRule& r, const NamedParam& p) {
  bool by_name = any_match(r.match, p.name);
  bool by_module = false;
  for (auto& k : r.modules) by_module = by_module || glob_match(normalize_kind(k), p.kind);
  bool selected = (r.match.empty() && r.modules.empty()) || by_name || by_module;
  bool attr_ok = r.param_names.empty() ||
                 std::find(r.param_names.begin(), r.param_names.end(), p.attr) != r.param_names.end();
  return selected && attr_ok;
}

// An empty default group is expected where frozen rules took the parameters no other rule did
// (fine-tuning only a head): no warning then.
bool frozen_claims_rest(const std::vector<GroupRule>& rules, const std::vector<ParamGroup>& groups) {
  for (size_t i = 0; i < rules.size(); ++i)
    if (rules[i].frozen && !groups[i + 1].params.empty()) return true;
  return false;
}

}  // namespace

std::string normalize_kind(const std::string& kind) {
  std::string r;
  for (char c : kind)
    if (c != '_') r += char(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

std::vector<ParamGroup> build_param_groups(const nn::Module& model, const std::vector<GroupRule>& rules,
                                           std::vector<std::string>* warnings) {
  auto warn = [&](std::string w) {
    if (warnings) warnings->push_back(std::move(w));
  };
  std::vector<NamedParam> params;
  std::set<TensorImpl*> seen;
  std::set<std::string> kinds;  // normalized kinds of the model's modules
  collect(model, "", seen, params, kinds);
  for (auto& t : Registry<nn::LayerType>::get().names()) kinds.insert(normalize_kind(t));
  std::vector<std::string> kind_list(kinds.begin(), kinds.end());

  std::set<std::string> names{"default"};
  for (auto& r : rules) {
    TR_CHECK(!r.name.empty(), "param group rule without a name");
    TR_CHECK(r.name != "default", "param group name 'default' is reserved for the parameters no rule claims");
    TR_CHECK(names.insert(r.name).second, "two param groups are named '", r.name, "'");
    TR_CHECK(!r.match.empty() || !r.modules.empty() || !r.param_names.empty(), "param group '", r.name,
             "' selects no parameters: give match, modules or param_names");
    for (auto& k : r.modules) {
      if (has_wildcard(k) || kinds.count(normalize_kind(k))) continue;
      std::string near = nearest_name(normalize_kind(k), kind_list);
      TR_CHECK(false, "param group '", r.name, "': unknown module kind '", k, "'",
               near.empty() ? "" : "; did you mean '" + near + "'?",
               " (layer types and class names compare without case and underscores)");
    }
    for (auto& g : r.match)
      if (std::none_of(params.begin(), params.end(), [&](const NamedParam& p) { return glob_match(g, p.name); }))
        warn(str("param group '", r.name, "': match pattern '", g, "' matches no parameter of the model"));
  }

  std::vector<ParamGroup> groups(rules.size() + 1);
  groups[0].name = "default";
  for (size_t i = 0; i < rules.size(); ++i) {
    groups[i + 1].name = rules[i].name;
    groups[i + 1].options = rules[i].options;
  }
  for (auto& p : params) {
    int owner = -1;
    for (size_t i = 0; i < rules.size(); ++i) {
      if (!rule_selects(rules[i], p)) continue;
      TR_CHECK(owner < 0, "parameter '", p.name, "' is claimed by param groups '", rules[owner].name, "' and '",
               rules[i].name, "'");
      owner = int(i);
    }
    groups[owner + 1].params.push_back(p.t);
  }
  for (auto& g : groups)
    if (g.params.empty() && !(g.name == "default" && frozen_claims_rest(rules, groups)))
      warn(params.empty()          ? str("param group '", g.name, "' is empty: the model has no parameters")
           : g.name == "default" ? std::string("param group 'default' is empty: the rules claim every parameter")
                                 : str("param group '", g.name, "' is empty: no parameter matches its rule"));
  std::vector<ParamGroup> trainable{std::move(groups[0])};
  for (size_t i = 0; i < rules.size(); ++i)
    if (!rules[i].frozen) trainable.push_back(std::move(groups[i + 1]));
  return trainable;
}

int64_t freeze_parameters(const nn::Module& model, const std::vector<GroupRule>& rules) {
  std::vector<NamedParam> params;
  std::set<TensorImpl*> seen;
  std::set<std::string> kinds;
  collect(model, "", seen, params, kinds);
  int64_t n = 0;
  for (auto& p : params)
    for (auto& r : rules)
      if (r.frozen && rule_selects(r, p)) {
        p.t.requires_grad_(false);
        ++n;
        break;
      }
  return n;
}

std::vector<GroupRule> parse_group_rules(const toml::array& groups, const std::string& file,
                                         const std::string& type) {
  std::vector<GroupRule> rules;
  std::set<std::string> names{"default"};
  for (size_t i = 0; i < groups.size(); ++i) {
    const toml::table* tt = groups[i].as_table();
    if (!tt) throw Error(str(toml_location(groups[i], file), ": [[optimizer.groups]] entry ", i + 1, " must be a table"));
    GroupRule r;
    r.name = str("group", i + 1);
    if (auto n = tt->get("name"); n && n->is_string()) r.name = n->value<std::string>().value();
    TomlTable t(*tt, file, str("[[optimizer.groups]] '", r.name, "'"));
    r.name = t.get_string("name", r.name);
    if (r.name == "default") t.fail("name", "is reserved for the parameters no rule claims; choose another name");
    if (!names.insert(r.name).second) t.fail("name", "is used by another param group");
    if (t.has("match")) r.match = t.get_strings("match");
    if (t.has("modules")) r.modules = t.get_strings("modules");
    if (t.has("param_names")) r.param_names = t.get_strings("param_names");
    r.frozen = t.get_bool("frozen", false);
    r.options = read_hyperparameters(t, type, /*with_defaults=*/false);
    if (r.frozen && !r.options.empty())
      t.fail("frozen", "parameters get no optimizer step: a frozen group takes no hyperparameters");
    t.finish();
    if (r.match.empty() && r.modules.empty() && r.param_names.empty())
      throw Error(str(t.location(), ": ", t.what(), " selects no parameters: give match, modules or param_names"));
    rules.push_back(std::move(r));
  }
  return rules;
}

}  // namespace tr::optim
