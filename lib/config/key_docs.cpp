// The fixed keys' rows for people: `trainer list keys` and docs/config.md's key tables, both from
// run_config_keys.def, so that neither can say something the parser does not do.
#include <sstream>
#include "config/run_config.h"
#include "nn/activation_checkpoint.h"

namespace tr::config {

const std::vector<KeyDoc>& key_docs() {
  static const std::vector<KeyDoc> rows = [] {
    std::vector<KeyDoc> r;
#define TR_KEY(Struct, tbl, member, key, Type, dflt, check, doc)                   \
  r.push_back({tbl, key, keys::Type::kName, keys::shown_default<keys::Type>(dflt), \
               keys::shown_allowed<keys::Type>(check), doc});
#include "config/run_config_keys.def"
    return r;
  }();
  return rows;
}

std::vector<std::pair<std::string, std::string>> key_list_entries() {
  std::vector<std::pair<std::string, std::string>> r;
  for (const KeyDoc& k : key_docs()) {
    std::string what = k.type + " = " + k.default_value;
    if (!k.allowed.empty()) what += " (" + k.allowed + ")";
    r.emplace_back(k.table + "." + k.key, what + ": " + k.doc);
  }
  return r;
}

namespace {

// A cell of a Markdown table: code where it is code; a '|' would end the cell.
std::string cell(const std::string& s, bool code) {
  std::string r;
  for (char ch : s) r += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return code && !r.empty() ? "`" + r + "`" : r;
}

// A default the docs set as code: a TOML value ("runs", 25.0), not words ("unset", "the config file's stem").
bool is_toml_value(const std::string& s) {
  try {
    (void)toml::parse("v = " + s);
    return true;
  } catch (const toml::parse_error&) { return false; }
}

}  // namespace

std::string key_table_markdown(const std::string& section) {
  std::ostringstream os;
  os << "| key | type | default | allowed | |\n| --- | --- | --- | --- | --- |\n";
  for (const KeyDoc& k : key_docs()) {
    if (k.table != section && k.table.rfind(section + ".", 0) != 0) continue;
    const std::string key = k.table == section ? k.key : k.table.substr(section.size() + 1) + "." + k.key;
    const bool code_default = is_toml_value(k.default_value);
    os << "| " << cell(key, true) << " | " << cell(k.type, false) << " | " << cell(k.default_value, code_default)
       << " | " << cell(k.allowed, false) << " | " << cell(k.doc, false) << " |\n";
  }
  return os.str();
}

}  // namespace tr::config
