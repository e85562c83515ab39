// Hyperparameter descriptions and the one reader of optimizer hyperparameters from TOML.
#include "optim/optimizer_registry.h"
#include <algorithm>
#include <cmath>
#include <set>

namespace tr::optim {

Hyperparameter Hyperparameter::number(std::string key, double dflt, double lo, double hi, bool hi_open) {
  Hyperparameter h;
  h.key = std::move(key);
  h.dflt = {dflt};
  h.lo = lo;
  h.hi = hi;
  h.hi_open = hi_open;
  return h;
}

Hyperparameter Hyperparameter::boolean(std::string key, bool dflt) {
  Hyperparameter h;
  h.key = std::move(key);
  h.form = Form::Bool;
  h.dflt = {dflt ? 1.0 : 0.0};
  return h;
}

Hyperparameter Hyperparameter::pair(std::string key, std::vector<std::string> elements, std::vector<double> dflt,
                                    double lo, double hi, bool hi_open) {
  TR_CHECK(elements.size() == 2 && dflt.size() == 2, "hyperparameter '", key,
           "': a pair needs two elements and two defaults");
  Hyperparameter h = number(std::move(key), 0, lo, hi, hi_open);
  h.form = Form::Pair;
  h.elements = std::move(elements);
  h.dflt = std::move(dflt);
  return h;
}

std::vector<std::string> Hyperparameter::option_keys() const {
  return form == Form::Pair ? elements : std::vector{key};
}

bool Hyperparameter::in_range(double v) const { return v >= lo && (hi_open ? v < hi : v <= hi); }

std::string Hyperparameter::range() const {
  const bool low = std::isfinite(lo), high = std::isfinite(hi);
  if (low && high) return str("in [", lo, ", ", hi, hi_open ? ")" : "]");
  if (low) return str(">= ", lo);
  if (high) return str(hi_open ? "< " : "<= ", hi);
  return "";
}

std::string Hyperparameter::doc() const {
  if (form == Form::Bool) return key + (dflt[0] != 0 ? " = true" : " = false");
  if (form == Form::Pair) return str(key, " = [", dflt[0], ", ", dflt[1], "]");
  return str(key, " = ", dflt[0]);
}

const Hyperparameter* OptimizerType::find(const std::string& key) const {
  for (const auto& h : hyperparameters)
    if (h.key == key) return &h;
  return nullptr;
}

std::string OptimizerType::doc() const {
  std::string s;
  for (const auto& h : hyperparameters) s += (s.empty() ? "" : ", ") + h.doc();
  return s;
}

namespace {

// Reads one hyperparameter that `t` has (or, with a default, may lack) into `o`.
void read_one(const TomlTable& t, const Hyperparameter& h, bool with_default, Options& o) {
  if (h.form == Hyperparameter::Form::Bool) {
    o[h.key] = t.get_bool(h.key, h.dflt[0] != 0) ? 1.0 : 0.0;
    return;
  }
  if (h.form == Hyperparameter::Form::Number) {
    const double v = with_default ? t.get_float(h.key, h.dflt[0]) : t.get_float(h.key);
    if (!h.in_range(v)) t.fail(h.key, str("must be ", h.range(), ", got ", v));
    o[h.key] = v;
    return;
  }
  const std::vector<double> v = with_default ? t.get_floats(h.key, h.dflt) : t.get_floats(h.key);
  if (v.size() != 2)
    t.fail(h.key, str("must be a list of two numbers [", h.elements[0], ", ", h.elements[1], "], got ", v.size()));
  for (int j = 0; j < 2; ++j) {
    if (!h.in_range(v[j])) t.fail(h.key, str(h.elements[j], " must be ", h.range(), ", got ", v[j]));
    o[h.elements[j]] = v[j];
  }
}

}  // namespace

Options read_hyperparameters(const TomlTable& t, const std::string& type_name, bool with_defaults) {
  const OptimizerType& type = Registry<OptimizerType>::get().at(type_name, t.location() + ": " + t.what());
  // another optimizer's key gets its own message (finish() would call it unknown)
  std::set<std::string> others;
  for (const auto& [name, other] : Registry<OptimizerType>::get().all())
    for (const auto& h : other.hyperparameters) others.insert(h.key);
  std::vector<std::string> keys;
  for (const auto& h : type.hyperparameters) keys.push_back(h.key);
  for (const auto& [k, v] : t.raw()) {
    const std::string key(k.str());
    if (others.count(key) && !type.find(key))
      t.fail(key, str("is not a hyperparameter of ", type_name, " (its keys: ", keys, ")"));
  }
  Options o;
  for (const auto& h : type.hyperparameters)
    if (with_defaults || t.has(h.key)) read_one(t, h, with_defaults, o);
  return o;
}

std::string optimizer_name_of_class(const std::string& class_name) {
  for (const auto& [name, type] : Registry<OptimizerType>::get().all())
    if (type.class_name == class_name) return name;
  return "";
}

const OptimizerType* optimizer_type_of(const Optimizer& opt) {
  const std::string name = optimizer_name_of_class(opt.type_name());
  return name.empty() ? nullptr : &Registry<OptimizerType>::get().at(name);
}

}  // namespace tr::optim
