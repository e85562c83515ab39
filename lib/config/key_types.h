// The kinds of value a fixed key of the run config holds, as run_config_keys.def names them: each
// kind says how a value is read from its TomlTable (through TomlTable's getters, so that every
// error keeps file:line:col, the key and the expected type), how the resolved config writes it,
// and how docs/config.md and `trainer list` show its type and default. A Check is what a key's
// value may be beyond its type (a fixed set, a bound), with the message that says so.
#pragma once
#include <toml++/toml.h>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#include "toml/toml_table.h"

namespace tr::config {

// A default the parser works out from the rest of the config (the run's name from the file's
// stem, the loss scaler from the amp dtype); the struct starts value-initialised, the docs show
// `shown`.
struct Derived {
  const char* shown;
};
inline Derived derived(const char* shown) { return {shown}; }

// What a value may be beyond its type. A default is always allowed: a check applies to a value
// the config gives (a key whose default means "unset", such as tokens_per_step = 0, relies on it).
struct Check {
  std::vector<std::string> choices;  // a fixed set of strings (TomlTable::get_choice lists them)
  double lo = 0, hi = 0;
  bool has_lo = false, has_hi = false, lo_open = false, hi_open = false;
  std::string message;  // the error's text after the key: "must be positive"

  bool allows(double v) const;
  void check(const TomlTable& t, const std::string& key, double v) const;
  std::string shown() const;  // "> 0", "[0, 1)", "\"bf16\", \"fp16\"", "" for anything
};

Check any_value();
Check one_of(std::vector<std::string> choices);
Check above(double lo, std::string message);                // > lo
Check at_least(double lo, std::string message);             // >= lo
Check range_co(double lo, double hi, std::string message);  // [lo, hi)
Check range_oo(double lo, double hi, std::string message);  // (lo, hi)

// The config's own context for readers: paths are relative to the config's directory.
struct KeyContext {
  std::string dir;
};

namespace keys {

// A struct member's starting value from the declared default ({} included: D is then T).
template <typename T, typename D = T> T initial(const D& v) {
  if constexpr (std::is_same_v<D, Derived>)
    return T{};
  else
    return T(v);
}

// A value as TOML writes it: 25.0, true; a string in double quotes, as the docs write strings.
template <typename V> std::string toml_text(const V& v) {
  if constexpr (std::is_convertible_v<V, std::string>) {
    std::string s = "\"";
    for (char ch : std::string(v)) s += ch == '"' || ch == '\\' ? std::string("\\") + ch : std::string(1, ch);
    return s + "\"";
  } else {
    std::ostringstream os;
    os << toml::value<V>(v);
    return os.str();
  }
}

// Each kind: value_type (the struct member's type), kName (the docs' type column), read, write,
// show (a default as the docs print it) and allowed (what the docs say beyond a Check, if anything).
struct Int {
  using value_type = int64_t;
  static constexpr const char* kName = "integer";
  static value_type read(const TomlTable& t, const std::string& key, value_type dflt, const Check& c,
                         const KeyContext&);
  static void write(toml::table& out, const std::string& key, value_type v) { out.insert_or_assign(key, v); }
  static std::string show(value_type v) { return std::to_string(v); }
};

// An integer whose default 0 means "not given" (another key sizes the same thing): written only when set.
struct OptionalInt : Int {
  static void write(toml::table& out, const std::string& key, value_type v) {
    if (v > 0) out.insert_or_assign(key, v);
  }
  static std::string show(value_type) { return "unset"; }
};

struct Float {
  using value_type = double;
  static constexpr const char* kName = "number";
  static value_type read(const TomlTable& t, const std::string& key, value_type dflt, const Check& c,
                         const KeyContext&);
  static void write(toml::table& out, const std::string& key, value_type v) { out.insert_or_assign(key, v); }
  static std::string show(value_type v) { return toml_text(v); }
};

struct Bool {
  using value_type = bool;
  static constexpr const char* kName = "boolean";
  static value_type read(const TomlTable& t, const std::string& key, value_type dflt, const Check&, const KeyContext&) {
    return t.get_bool(key, dflt);
  }
  static void write(toml::table& out, const std::string& key, value_type v) { out.insert_or_assign(key, v); }
  static std::string show(value_type v) { return v ? "true" : "false"; }
};

// Set or not: unset leaves the choice to the library (torch's defaults), and is not written.
struct OptionalBool {
  using value_type = std::optional<bool>;
  static constexpr const char* kName = "boolean";
  static value_type read(const TomlTable& t, const std::string& key, value_type dflt, const Check&, const KeyContext&);
  static void write(toml::table& out, const std::string& key, value_type v) {
    if (v) out.insert_or_assign(key, *v);
  }
  static std::string show(value_type v) { return v ? Bool::show(*v) : "unset"; }
};

// A string; with Check choices, one of them.
struct String {
  using value_type = std::string;
  static constexpr const char* kName = "string";
  static value_type read(const TomlTable& t, const std::string& key, const value_type& dflt, const Check& c,
                         const KeyContext&);
  static void write(toml::table& out, const std::string& key, const value_type& v) { out.insert_or_assign(key, v); }
  static std::string show(const value_type& v) { return toml_text(v); }
};

// A file: relative to the config's directory or the working directory (resolve_path).
struct Path : String {
  static constexpr const char* kName = "path";
  static value_type read(const TomlTable& t, const std::string& key, const value_type& dflt, const Check& c,
                         const KeyContext& ctx);
};

// A file that may be absent: written only when given.
struct OptionalPath : Path {
  static void write(toml::table& out, const std::string& key, const value_type& v) {
    if (!v.empty()) out.insert_or_assign(key, v);
  }
  static std::string show(const value_type& v) { return v.empty() ? "unset" : toml_text(v); }
};

// [model] init: the starting weights (a path); an inline model's [[model.init]] tables are its
// initialisation rules instead, which the model builder reads.
struct StartingWeights : OptionalPath {
  static constexpr const char* kName = "path";
  static value_type read(const TomlTable& t, const std::string& key, const value_type& dflt, const Check& c,
                         const KeyContext& ctx);
};

// [model] prefix: a string removed from the weights' names, or a table of renames { "from." = "to." }.
struct Prefixes {
  using value_type = std::vector<std::pair<std::string, std::string>>;
  static constexpr const char* kName = "string or table";
  static value_type read(const TomlTable& t, const std::string& key, const value_type& dflt, const Check&,
                         const KeyContext&);
  static void write(toml::table& out, const std::string& key, const value_type& v);
  static std::string show(const value_type& v) { return v.empty() ? "none" : "(renames)"; }
};

// [train.grad_clip] norm_type: a number p > 0, or "inf".
struct NormType {
  using value_type = double;
  static constexpr const char* kName = "number or \"inf\"";
  static constexpr const char* kAllowed = "> 0 or \"inf\"";
  static value_type read(const TomlTable& t, const std::string& key, value_type dflt, const Check&, const KeyContext&);
  static void write(toml::table& out, const std::string& key, value_type v);
  static std::string show(value_type v) { return toml_text(v); }
};

// [run] device: auto, cpu, cuda or cuda:N.
struct DeviceSpec : String {
  static constexpr const char* kAllowed = "\"auto\", \"cpu\", \"cuda\", \"cuda:N\"";
  static value_type read(const TomlTable& t, const std::string& key, const value_type& dflt, const Check& c,
                         const KeyContext&);
};

// A name in a registry: an unknown one is an error with the nearest and the known names.
struct DatasetName : String {
  static constexpr const char* kAllowed = "a registered dataset (`trainer list datasets`)";
  static value_type read(const TomlTable& t, const std::string& key, const value_type& dflt, const Check& c,
                         const KeyContext&);
};
struct OptimizerName : String {
  static constexpr const char* kAllowed = "a registered optimizer (`trainer list optimizers`)";
  static value_type read(const TomlTable& t, const std::string& key, const value_type& dflt, const Check& c,
                         const KeyContext&);
};
struct LossName : String {
  static constexpr const char* kAllowed = "a registered loss (`trainer list losses`)";
  static value_type read(const TomlTable& t, const std::string& key, const value_type& dflt, const Check& c,
                         const KeyContext&);
};

// [[optimizer.groups]]: kept as TOML (in RunConfig::source), read when the optimizer is built.
struct GroupRules {
  using value_type = const toml::array*;
  static constexpr const char* kName = "array of tables";
  static value_type read(const TomlTable& t, const std::string& key, value_type dflt, const Check&, const KeyContext&);
  static void write(toml::table& out, const std::string& key, value_type v) {
    if (v) out.insert_or_assign(key, *v);
  }
  static std::string show(value_type) { return "none"; }
};

// The docs' default and allowed columns of a key.
template <typename Type, typename D = typename Type::value_type> std::string shown_default(const D& dflt) {
  if constexpr (std::is_same_v<D, Derived>)
    return dflt.shown;
  else
    return Type::show(initial<typename Type::value_type>(dflt));
}
template <typename Type> std::string shown_allowed(const Check& c) {
  if constexpr (requires { Type::kAllowed; })
    return Type::kAllowed;
  else
    return c.shown();
}

}  // namespace keys

}  // namespace tr::config
