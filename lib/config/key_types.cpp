#include "config/key_types.h"
#include <cmath>
#include <limits>
#include "data/dataset_registry.h"
#include "nn/loss.h"
#include "optim/optimizer_registry.h"

namespace tr::config {

bool Check::allows(double v) const {  // (NaN is outside every bound)
  return (!has_lo || (lo_open ? v > lo : v >= lo)) && (!has_hi || (hi_open ? v < hi : v <= hi));
}

void Check::check(const TomlTable& t, const std::string& key, double v) const {
  if (!allows(v)) t.fail(key, message);
}

std::string Check::shown() const {
  auto plain = [](double x) { return x == std::floor(x) ? std::to_string(int64_t(x)) : keys::toml_text(x); };
  if (!choices.empty()) {
    std::string s;
    for (const std::string& c : choices) s += (s.empty() ? "" : ", ") + keys::toml_text(c);
    return s;
  }
  if (has_lo && has_hi) return str(lo_open ? "(" : "[", plain(lo), ", ", plain(hi), hi_open ? ")" : "]");
  if (has_lo) return str(lo_open ? "> " : ">= ", plain(lo));
  return "";
}

Check any_value() { return {}; }

Check one_of(std::vector<std::string> choices) {
  Check c;
  c.choices = std::move(choices);
  return c;
}

Check above(double lo, std::string message) {
  Check c;
  c.lo = lo, c.has_lo = true, c.lo_open = true, c.message = std::move(message);
  return c;
}

Check at_least(double lo, std::string message) {
  Check c = above(lo, std::move(message));
  c.lo_open = false;
  return c;
}

Check range_co(double lo, double hi, std::string message) {
  Check c = at_least(lo, std::move(message));
  c.hi = hi, c.has_hi = true, c.hi_open = true;
  return c;
}

Check range_oo(double lo, double hi, std::string message) {
  Check c = range_co(lo, hi, std::move(message));
  c.lo_open = true;
  return c;
}

namespace keys {

Int::value_type Int::read(const TomlTable& t, const std::string& key, value_type dflt, const Check& c,
                          const KeyContext&) {
  const value_type v = t.get_int(key, dflt);
  if (t.has(key)) c.check(t, key, double(v));
  return v;
}

Float::value_type Float::read(const TomlTable& t, const std::string& key, value_type dflt, const Check& c,
                              const KeyContext&) {
  const value_type v = t.get_float(key, dflt);
  if (t.has(key)) c.check(t, key, v);
  return v;
}

OptionalBool::value_type OptionalBool::read(const TomlTable& t, const std::string& key, value_type dflt, const Check&,
                                            const KeyContext&) {
  return t.has(key) ? value_type(t.get_bool(key, false)) : dflt;
}

String::value_type String::read(const TomlTable& t, const std::string& key, const value_type& dflt, const Check& c,
                                const KeyContext&) {
  return c.choices.empty() ? t.get_string(key, dflt) : t.get_choice(key, c.choices, dflt);
}

Path::value_type Path::read(const TomlTable& t, const std::string& key, const value_type& dflt, const Check&,
                            const KeyContext& ctx) {
  return t.has(key) ? resolve_path(t.get_string(key), ctx.dir) : dflt;
}

StartingWeights::value_type StartingWeights::read(const TomlTable& t, const std::string& key, const value_type& dflt,
                                                  const Check& c, const KeyContext& ctx) {
  const toml::node* n = t.node(key);
  return n && !n->is_array() ? Path::read(t, key, dflt, c, ctx) : dflt;
}

Prefixes::value_type Prefixes::read(const TomlTable& t, const std::string& key, const value_type& dflt, const Check&,
                                    const KeyContext&) {
  const toml::node* p = t.node(key);
  if (!p) return dflt;
  if (p->is_string()) return {{p->value<std::string>().value(), ""}};
  const toml::table* pt = p->as_table();
  if (!pt) t.fail(key, "must be a string (removed from the file's keys) or a table { \"from.\" = \"to.\" }");
  value_type r;
  for (auto&& [from, to] : *pt) {
    if (!to.is_string()) t.fail(key, str("maps '", from.str(), "' to a non-string; expected { \"from.\" = \"to.\" }"));
    r.emplace_back(std::string(from.str()), to.value<std::string>().value());
  }
  return r;
}

void Prefixes::write(toml::table& out, const std::string& key, const value_type& v) {
  if (v.empty()) return;
  toml::table renames;
  for (const auto& [from, to] : v) renames.insert(from, to);
  out.insert_or_assign(key, std::move(renames));
}

NormType::value_type NormType::read(const TomlTable& t, const std::string& key, value_type dflt, const Check&,
                                    const KeyContext&) {
  if (const toml::node* n = t.node(key); n && n->is_string()) {
    if (t.get_string(key) != "inf") t.fail(key, "must be a number p > 0 or \"inf\"");
    return std::numeric_limits<double>::infinity();
  }
  const value_type v = t.get_float(key, dflt);
  if (!(v > 0)) t.fail(key, "must be a number p > 0 or \"inf\"");
  return v;
}

void NormType::write(toml::table& out, const std::string& key, value_type v) {
  if (std::isinf(v))
    out.insert_or_assign(key, "inf");
  else
    out.insert_or_assign(key, v);
}

DeviceSpec::value_type DeviceSpec::read(const TomlTable& t, const std::string& key, const value_type& dflt,
                                        const Check& c, const KeyContext& ctx) {
  value_type v = String::read(t, key, dflt, c, ctx);
  if (v != "auto" && v != "cpu" && v.rfind("cuda", 0) != 0)
    t.fail(key, str("is '", v, "', expected auto, cpu, cuda or cuda:N"));
  return v;
}

DatasetName::value_type DatasetName::read(const TomlTable& t, const std::string& key, const value_type& dflt,
                                          const Check&, const KeyContext&) {
  t.get_registered<data::DatasetType>(key, dflt);
  return t.get_string(key, dflt);
}

OptimizerName::value_type OptimizerName::read(const TomlTable& t, const std::string& key, const value_type& dflt,
                                              const Check&, const KeyContext&) {
  t.get_registered<optim::OptimizerType>(key, dflt);
  return t.get_string(key, dflt);
}

LossName::value_type LossName::read(const TomlTable& t, const std::string& key, const value_type& dflt, const Check&,
                                    const KeyContext&) {
  t.get_registered<nn::LossType>(key, dflt);
  return t.get_string(key, dflt);
}

GroupRules::value_type GroupRules::read(const TomlTable& t, const std::string& key, value_type dflt, const Check&,
                                        const KeyContext&) {
  const toml::node* g = t.node(key);
  if (!g) return dflt;
  if (!g->is_array_of_tables()) t.fail(key, "must be an array of tables ([[optimizer.groups]])");
  return g->as_array();
}

}  // namespace keys

}  // namespace tr::config
