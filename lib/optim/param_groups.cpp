#include "optim/param_groups.h"
#include <set>
#include "optim/optimizer_registry.h"
#include "toml/toml_table.h"

namespace tr::optim {

namespace {

// An empty default group is expected where frozen rules took the parameters no other rule did
// (fine-tuning only a head): no warning then.
bool frozen_claims_rest(const std::vector<GroupRule>& rules, const std::vector<ParamGroup>& groups) {
  for (size_t i = 0; i < rules.size(); ++i)
    if (rules[i].frozen && !groups[i + 1].params.empty()) return true;
  return false;
}

}  // namespace

std::vector<ParamGroup> build_param_groups(const nn::Module& model, const std::vector<GroupRule>& rules,
                                           std::vector<std::string>* warnings) {
  auto warn = [&](std::string w) {
    if (warnings) warnings->push_back(std::move(w));
  };
  const std::vector<nn::ParamRef> params = nn::list_parameters(model);
  std::set<std::string> names{"default"};
  for (auto& r : rules) {
    TR_CHECK(!r.name.empty(), "param group rule without a name");
    TR_CHECK(r.name != "default", "param group name 'default' is reserved for the parameters no rule claims");
    TR_CHECK(names.insert(r.name).second, "two param groups are named '", r.name, "'");
    TR_CHECK(!r.select.empty(), "param group '", r.name,
             "' selects no parameters: give match, modules, param_names, "
             "min_dim or max_dim");
    for (auto& w : nn::check_selector(r.select, model, str("param group '", r.name, "'"))) warn(w);
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
      if (!nn::selects(rules[i].select, p)) continue;
      TR_CHECK(owner < 0, "parameter '", p.name(), "' is claimed by param groups '", rules[owner].name, "' and '",
               rules[i].name, "'");
      owner = int(i);
    }
    groups[owner + 1].params.push_back(p.t);
  }
  for (auto& g : groups)
    if (g.params.empty() && !(g.name == "default" && frozen_claims_rest(rules, groups)))
      warn(params.empty()        ? str("param group '", g.name, "' is empty: the model has no parameters")
           : g.name == "default" ? std::string("param group 'default' is empty: the rules claim every parameter")
                                 : str("param group '", g.name, "' is empty: no parameter matches its rule"));
  std::vector<ParamGroup> trainable{std::move(groups[0])};
  for (size_t i = 0; i < rules.size(); ++i)
    if (!rules[i].frozen) trainable.push_back(std::move(groups[i + 1]));
  return trainable;
}

int64_t freeze_parameters(const nn::Module& model, const std::vector<GroupRule>& rules) {
  int64_t n = 0;
  for (auto& p : nn::list_parameters(model))
    for (auto& r : rules)
      if (r.frozen && nn::selects(r.select, p)) {
        Tensor t = p.t;
        t.requires_grad_(false);
        ++n;
        break;
      }
  return n;
}

std::vector<GroupRule> parse_group_rules(const toml::array& groups, const std::string& file, const std::string& type) {
  std::vector<GroupRule> rules;
  std::set<std::string> names{"default"};
  for (size_t i = 0; i < groups.size(); ++i) {
    const toml::table* tt = groups[i].as_table();
    if (!tt)
      throw Error(str(toml_location(groups[i], file), ": [[optimizer.groups]] entry ", i + 1, " must be a table"));
    GroupRule r;
    r.name = str("group", i + 1);
    if (auto n = tt->get("name"); n && n->is_string()) r.name = n->value<std::string>().value();
    TomlTable t(*tt, file, str("[[optimizer.groups]] '", r.name, "'"));
    r.name = t.get_string("name", r.name);
    if (r.name == "default") t.fail("name", "is reserved for the parameters no rule claims; choose another name");
    if (!names.insert(r.name).second) t.fail("name", "is used by another param group");
    r.select = nn::ParamSelector::read(t);
    r.frozen = t.get_bool("frozen", false);
    r.options = read_hyperparameters(t, type, /*with_defaults=*/false);
    if (r.frozen && !r.options.empty())
      t.fail("frozen", "parameters get no optimizer step: a frozen group takes no hyperparameters");
    t.finish();
    if (r.select.empty())
      throw Error(str(t.location(), ": ", t.what(),
                      " selects no parameters: give match, modules, param_names, min_dim or max_dim"));
    rules.push_back(std::move(r));
  }
  return rules;
}

}  // namespace tr::optim
