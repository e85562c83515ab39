#include "toml/toml_table.h"
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <type_traits>

namespace tr {

std::string toml_location(const toml::node& n, const std::string& file) {
  const auto& s = n.source();
  if (s.path && s.path->rfind(kOverrideSource, 0) == 0) return *s.path;  // a value given on the command line
  if (s.begin.line == 0) return file;                                    // a node made in code has no position
  return str(file, ":", s.begin.line, ":", s.begin.column);
}

TomlTable::TomlTable(const toml::table& t, std::string file, std::string what)
    : t_(&t), file_(std::move(file)), what_(std::move(what)) {}

namespace {

template <typename V> toml::array to_array(const std::vector<V>& v) {
  toml::array a;
  for (const auto& x : v) a.push_back(x);
  return a;
}

}  // namespace

template <typename V> const V& TomlTable::recorded(const std::string& key, const V& v) const {
  if (!resolved_) return v;
  if constexpr (std::is_same_v<V, std::vector<int64_t>> || std::is_same_v<V, std::vector<double>> ||
                std::is_same_v<V, std::vector<std::string>>)
    resolved_->insert_or_assign(key, to_array(v));
  else
    resolved_->insert_or_assign(key, v);
  return v;
}

void TomlTable::record(const std::string& key, const std::string& value) const { recorded(key, value); }

std::string TomlTable::location() const { return toml_location(*t_, file_); }

void TomlTable::fail(const std::string& key, const std::string& msg) const {
  const toml::node* n = t_->get(key);
  std::string loc = n ? toml_location(*n, file_) : location();
  throw Error(str(loc, ": ", what_, ": '", key, "' ", msg));
}

bool TomlTable::has(const std::string& key) const {
  used_.insert(key);  // every key asked about is a known key of this table
  return t_->contains(key);
}

const toml::node* TomlTable::node(const std::string& key) const {
  used_.insert(key);
  return t_->get(key);
}

void TomlTable::type_error(const std::string& key, const char* expected) const {
  const toml::node* n = t_->get(key);
  std::ostringstream got;
  got << (n ? n->type() : toml::node_type::none);
  fail(key, str("must be ", expected, ", got ", got.str()));
}

const toml::node& TomlTable::require(const std::string& key, const char* type) const {
  const toml::node* n = node(key);
  if (!n) throw Error(str(location(), ": ", what_, ": missing required key '", key, "' (", type, ")"));
  return *n;
}

int64_t TomlTable::get_int(const std::string& key) const {
  const toml::node& n = require(key, "an integer");
  if (auto v = n.value_exact<int64_t>()) return recorded(key, *v);
  type_error(key, "an integer");
}
int64_t TomlTable::get_int(const std::string& key, int64_t dflt) const {
  return has(key) ? get_int(key) : recorded(key, dflt);
}

double TomlTable::get_float(const std::string& key) const {
  const toml::node& n = require(key, "a number");
  if (auto v = n.value<double>(); v && (n.is_floating_point() || n.is_integer())) return recorded(key, *v);
  type_error(key, "a number");
}
double TomlTable::get_float(const std::string& key, double dflt) const {
  return has(key) ? get_float(key) : recorded(key, dflt);
}

bool TomlTable::get_bool(const std::string& key, bool dflt) const {
  if (!has(key)) return recorded(key, dflt);
  const toml::node& n = require(key, "a boolean");
  if (auto v = n.value_exact<bool>()) return recorded(key, *v);
  type_error(key, "a boolean (true or false)");
}

std::string TomlTable::get_string(const std::string& key) const {
  const toml::node& n = require(key, "a string");
  if (auto v = n.value_exact<std::string>()) return recorded(key, *v);
  type_error(key, "a string");
}
std::string TomlTable::get_string(const std::string& key, const std::string& dflt) const {
  return has(key) ? get_string(key) : recorded(key, dflt);
}

std::string TomlTable::get_choice(const std::string& key, const std::vector<std::string>& choices,
                                  const std::string& dflt) const {
  std::string v = get_string(key, dflt);
  if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
    std::string near = nearest_name(v, choices);
    fail(key, str("is '", v, "', expected one of ", choices, near.empty() ? "" : "; did you mean '" + near + "'?"));
  }
  return v;
}

std::vector<int64_t> TomlTable::get_ints(const std::string& key) const {
  const toml::node& n = require(key, "a list of integers");
  std::vector<int64_t> r;
  if (const toml::array* a = n.as_array()) {
    for (const auto& e : *a) {
      auto v = e.value_exact<int64_t>();
      if (!v) type_error(key, "a list of integers");
      r.push_back(*v);
    }
    return recorded(key, r);
  }
  type_error(key, "a list of integers");
}

std::vector<int64_t> TomlTable::get_pair(const std::string& key, std::vector<int64_t> dflt) const {
  if (!has(key)) return recorded(key, dflt);
  const toml::node& n = require(key, "an integer or a list of two integers");
  if (auto v = n.value_exact<int64_t>()) return recorded(key, std::vector<int64_t>{*v, *v});
  if (n.is_array()) {
    auto r = get_ints(key);
    if (r.size() == 2) return r;
  }
  type_error(key, "an integer or a list of two integers");
}

std::vector<double> TomlTable::get_floats(const std::string& key) const {
  const toml::node& n = require(key, "a list of numbers");
  std::vector<double> r;
  if (const toml::array* a = n.as_array()) {
    for (const auto& e : *a) {
      auto v = e.value<double>();
      if (!v || !(e.is_floating_point() || e.is_integer())) type_error(key, "a list of numbers");
      r.push_back(*v);
    }
    return recorded(key, r);
  }
  type_error(key, "a list of numbers");
}

std::vector<double> TomlTable::get_floats(const std::string& key, const std::vector<double>& dflt) const {
  return has(key) ? get_floats(key) : recorded(key, dflt);
}

std::vector<std::string> TomlTable::get_strings(const std::string& key) const {
  const toml::node& n = require(key, "a list of strings");
  std::vector<std::string> r;
  if (const toml::array* a = n.as_array()) {
    for (const auto& e : *a) {
      auto v = e.value_exact<std::string>();
      if (!v) type_error(key, "a list of strings");
      r.push_back(*v);
    }
    return recorded(key, r);
  }
  if (auto v = n.value_exact<std::string>()) return recorded(key, std::vector<std::string>{*v});  // a list of one
  type_error(key, "a list of strings");
}

std::vector<std::string> TomlTable::get_strings(const std::string& key, const std::vector<std::string>& dflt) const {
  return has(key) ? get_strings(key) : recorded(key, dflt);
}

std::optional<TomlTable> TomlTable::get_table(const std::string& key) const {
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  if (const toml::table* t = n->as_table()) {
    TomlTable sub(*t, file_, what_ + "." + key);
    if (resolved_) {
      resolved_->insert_or_assign(key, toml::table{});
      sub.resolved_ = resolved_->get(key)->as_table();
    }
    return sub;
  }
  type_error(key, "a table");
}

std::vector<TomlTable> TomlTable::get_tables(const std::string& key) const {
  const toml::node& n = require(key, "an array of tables");
  std::vector<TomlTable> r;
  if (const toml::array* a = n.as_array()) {
    toml::array* out = nullptr;  // the recorded tables (node addresses in a toml::array are stable)
    if (resolved_) {
      resolved_->insert_or_assign(key, toml::array{});
      out = resolved_->get(key)->as_array();
    }
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::table* t = (*a)[i].as_table();
      if (!t) type_error(key, "an array of tables");
      r.emplace_back(*t, file_, str(what_, ".", key, "[", i, "]"));
      if (out) {
        out->push_back(toml::table{});
        r.back().resolved_ = out->back().as_table();
      }
    }
    return r;
  }
  type_error(key, "an array of tables");
}

void TomlTable::finish(const std::vector<std::string>& known_extra) const {
  for (const auto& [k, v] : *t_) {
    std::string key(k.str());
    if (used_.count(key) || std::find(known_extra.begin(), known_extra.end(), key) != known_extra.end()) continue;
    std::vector<std::string> known(used_.begin(), used_.end());
    known.insert(known.end(), known_extra.begin(), known_extra.end());
    std::string near = nearest_name(key, known);
    throw Error(str(toml_location(v, file_), ": unknown key '", key, "' in ", what_,
                    near.empty() ? "" : "; did you mean '" + near + "'?"));
  }
}

toml::table parse_toml_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  TR_CHECK(f.good(), "cannot open '", path, "'");
  std::ostringstream text;
  text << f.rdbuf();
  TR_CHECK(!f.bad(), "cannot read '", path, "'");
  return parse_toml_text(text.str(), path);
}

toml::table parse_toml_text(std::string_view text, const std::string& path) {
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    const auto& s = e.source();
    throw Error(str(path, ":", s.begin.line, ":", s.begin.column, ": TOML syntax error: ", e.description()));
  }
}

std::string resolve_path(const std::string& p, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;  // (a name the system cannot look up, e.g. too long, is simply not there)
  if (p.empty() || fs::path(p).is_absolute() || fs::exists(p, ec)) return p;
  fs::path alt = fs::path(dir) / p;
  return fs::exists(alt, ec) ? alt.string() : p;
}

}  // namespace tr
