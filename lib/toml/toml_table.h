// TomlTable: typed, validated access to one TOML table (a config section or a layer entry).
// Every error names the file, line:column, the table and the key; keys never read are
// reported by finish() as unknown, with the nearest known key. A table can record what its
// getters return (defaults included) into another table: the resolved config of a builder.
#pragma once
#include <toml++/toml.h>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>
#include "core/error.h"
#include "core/registry.h"

namespace tr {

// A value parsed from a command-line override carries "--set key=value" as its source path, so
// that an error about it names the argument, not the file.
inline constexpr const char* kOverrideSource = "--set ";

// "file:line:column" of a TOML node; the "--set key=value" argument of an override's value.
std::string toml_location(const toml::node& n, const std::string& file);

class TomlTable {
 public:
  // `what` names the table in messages: "[optimizer]", "layer 3 (conv2d)".
  TomlTable(const toml::table& t, std::string file, std::string what);

  bool has(const std::string& key) const;
  const toml::node* node(const std::string& key) const;  // marks the key as used

  int64_t get_int(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t dflt) const;
  double get_float(const std::string& key) const;  // an integer is accepted
  double get_float(const std::string& key, double dflt) const;
  bool get_bool(const std::string& key, bool dflt) const;
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& dflt) const;
  // One of `choices`; the error lists them.
  std::string get_choice(const std::string& key, const std::vector<std::string>& choices,
                         const std::string& dflt) const;
  std::vector<int64_t> get_ints(const std::string& key) const;
  // An int n -> {n, n}, or a list of two ints (torch's _pair).
  std::vector<int64_t> get_pair(const std::string& key, std::vector<int64_t> dflt) const;
  std::vector<double> get_floats(const std::string& key) const;
  std::vector<double> get_floats(const std::string& key, const std::vector<double>& dflt) const;
  std::vector<std::string> get_strings(const std::string& key) const;
  std::optional<TomlTable> get_table(const std::string& key) const;
  std::vector<std::string> get_strings(const std::string& key, const std::vector<std::string>& dflt) const;
  // The entry of Registry<T> that string `key` names; an unknown name fails at the key's location
  // with the registry's message (nearest and known names).
  template <typename T> const T& get_registered(const std::string& key) const {
    return registered<T>(key, get_string(key));
  }
  template <typename T> const T& get_registered(const std::string& key, const std::string& dflt) const {
    return registered<T>(key, get_string(key, dflt));
  }
  // An array of tables ([[layers]] or layers = [{...}, ...]).
  std::vector<TomlTable> get_tables(const std::string& key) const;

  // From now on every value a getter returns (the file's, or the default where the file has none)
  // is also written to `out` under its key; tables from get_table / get_tables record into a
  // sub-table / an array of tables of `out`. `out` must outlive the recording.
  void record_into(toml::table& out) { resolved_ = &out; }
  // Records a value the builder derived from a key (a path resolved against the config's
  // directory) in place of what the getter recorded. No-op when not recording.
  void record(const std::string& key, const std::string& value) const;

  // Throws for the first key that no getter read: "unknown key 'kernel' in layer 2 (conv2d)
  // at models/cnn.toml:12:1; did you mean 'kernel_size'? (known: ...)".
  void finish(const std::vector<std::string>& known_extra = {}) const;

  const std::string& file() const { return file_; }
  const std::string& what() const { return what_; }
  const toml::table& raw() const { return *t_; }
  std::string location() const;  // of the table itself
  // An error about `key` with its location.
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const;

 private:
  const toml::node& require(const std::string& key, const char* type) const;
  [[noreturn]] void type_error(const std::string& key, const char* expected) const;
  template <typename T> const T& registered(const std::string& key, const std::string& name) const {
    if (const T* e = Registry<T>::get().find(name)) return *e;
    fail(key, "is an " + Registry<T>::get().unknown_message(name));
  }
  // Returns `v` after recording it under `key` (when recording).
  template <typename V> const V& recorded(const std::string& key, const V& v) const;

  const toml::table* t_;
  std::string file_;
  std::string what_;
  mutable std::set<std::string> used_;  // keys asked about, present or not
  toml::table* resolved_ = nullptr;     // where getters record their values, if anywhere
};

// Parses a TOML file; syntax errors become one Error with file:line:column.
toml::table parse_toml_file(const std::string& path);
// Parses TOML text read from `path` (named in errors), as parse_toml_file does.
toml::table parse_toml_text(std::string_view text, const std::string& path);
// A path a TOML file names: as written when it is absolute or exists from the working directory,
// else relative to `dir` (the file's directory) when it exists there, else as written.
std::string resolve_path(const std::string& path, const std::string& dir);

}  // namespace tr
