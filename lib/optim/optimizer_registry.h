// The optimizer registry behind [optimizer] type = "...": Registry<OptimizerType>. An optimizer
// registers its hyperparameters (TOML key, form, default, valid range) and a builder, from its
// own file; the [optimizer] section, [[optimizer.groups]] tables, the state_dict's JSON form and
// OneCycleLR's momentum cycling all follow from that one description.
//
//   TR_REGISTER_OPTIMIZER("sgd", {"SGD",
//       {Hyperparameter::number("lr", 0.01, 0), ..., Hyperparameter::boolean("nesterov", false)},
//       build_sgd, {{"foreach", nullptr}, {"differentiable", false}}, "momentum"});
#pragma once
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include "core/registry.h"
#include "optim/optimizer.h"
#include "toml/toml_table.h"

namespace tr::optim {

// One hyperparameter: its key (torch's argument name, in TOML and in state_dict), how TOML writes
// it, its default and its valid range.
struct Hyperparameter {
  enum class Form {
    Number,
    Bool,  // true / false in TOML and state_dict, 1 / 0 in Options
    Pair,  // [a, b] in TOML and state_dict, two Options keys (torch's betas: beta1, beta2)
  };
  std::string key;
  Form form = Form::Number;
  std::vector<double> dflt;                              // one value; two for a pair
  std::vector<std::string> elements;                     // Pair: the Options keys of the two values
  double lo = -std::numeric_limits<double>::infinity();  // valid: lo <= v and v < hi (hi_open) or v <= hi
  double hi = std::numeric_limits<double>::infinity();
  bool hi_open = false;

  static Hyperparameter number(std::string key, double dflt, double lo = -std::numeric_limits<double>::infinity(),
                               double hi = std::numeric_limits<double>::infinity(), bool hi_open = false);
  static Hyperparameter boolean(std::string key, bool dflt);
  static Hyperparameter pair(std::string key, std::vector<std::string> elements, std::vector<double> dflt, double lo,
                             double hi, bool hi_open);

  std::vector<std::string> option_keys() const;  // {key}, or the pair's elements
  bool in_range(double v) const;
  std::string range() const;  // ">= 0", "in [0, 1)"; "" when any value is valid
  std::string doc() const;    // "lr = 0.01", "betas = [0.9, 0.999]"
};

using OptimizerBuilder =
    std::function<std::unique_ptr<Optimizer>(std::vector<ParamGroup> groups, const Options& defaults)>;

// An optimizer a run config can name.
struct OptimizerType {
  std::string class_name;  // torch's class, Optimizer::type_name() of what `build` makes: "SGD"
  std::vector<Hyperparameter> hyperparameters;
  OptimizerBuilder build;  // `defaults` holds every hyperparameter's Options keys
  // torch's param-group keys that do not change the math here (foreach, ...) with torch's values:
  // state_dict writes them, load_state_dict ignores them.
  nlohmann::json torch_constants = nlohmann::json::object();
  std::string momentum_key;  // the Options key OneCycleLR's cycle_momentum moves ("": none)

  static constexpr const char* kRegistryKind = "optimizer";

  const Hyperparameter* find(const std::string& key) const;
  std::string doc() const;  // one line: every key with its default
};

#define TR_REGISTER_OPTIMIZER(NAME, ...)                                                                             \
  static const ::tr::Registrar<::tr::optim::OptimizerType> TR_REGISTRY_CONCAT(tr_optimizer_registrar_, __COUNTER__)( \
      NAME, __VA_ARGS__)

// The hyperparameters of optimizer `type` (a registered name) that `t` sets, checked against their
// form and range, as Options; with `with_defaults`, every hyperparameter (its default where `t` has
// none). A key of another registered optimizer is an error naming this one's keys. Other keys are
// left for the caller's t.finish().
Options read_hyperparameters(const TomlTable& t, const std::string& type, bool with_defaults);

// The registered type that builds `opt` (by class name), or nullptr for an unregistered class.
const OptimizerType* optimizer_type_of(const Optimizer& opt);
// The registered name ("sgd") of torch's class `class_name` ("SGD", as a checkpoint's state.json
// records it), or "" for an unregistered class.
std::string optimizer_name_of_class(const std::string& class_name);

}  // namespace tr::optim
