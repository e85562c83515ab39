// The run config's fixed keys, walked from their one declaration (lib/config/run_config_keys.def):
// each key's errors (wrong type, a value outside its set, a misspelling) and its resolved default,
// and the two files made from the declarations, docs/config.md's key tables and the run_config fuzz
// target's dictionary, which must say what the declarations say.
// TRAINER_WRITE_CONFIG_DOCS=1 unit_tests "[config]" rewrites both files from the declarations.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include "config/run_config.h"
#include "unit/error_of.h"

namespace test_config_keys {

using namespace tr;
using Catch::Matchers::Contains;

namespace {

const std::string kRepo = std::string(TRAINER_FIXTURES_DIR) + "/../..";
const std::string kBase = "[model]\nfile = 'models/mlp_fmnist.toml'\n";

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

bool writing() { return std::getenv("TRAINER_WRITE_CONFIG_DOCS") != nullptr; }

// The error of the base config with `--set` assignments (a key's own table: --set reaches
// nested tables too).
std::string error_with(const std::vector<std::string>& sets) {
  return test::error_of([&] { config::parse_run_config(kBase, "c.toml", sets); });
}

std::string dotted(const config::KeyDoc& k) { return k.table + "." + k.key; }

// The tables the docs hold: "run", "train" (with train.grad_clip's keys), ...
std::vector<std::string> sections() {
  std::vector<std::string> r;
  for (const config::KeyDoc& k : config::key_docs()) {
    const std::string top = k.table.substr(0, k.table.find('.'));
    if (std::find(r.begin(), r.end(), top) == r.end()) r.push_back(top);
  }
  return r;
}

// libFuzzer's dictionary entries for the declared keys: section headers, assignments, --set
// prefixes and the values of fixed sets, as a fuzzer would otherwise have to guess them.
std::string dict_block() {
  std::vector<std::string> words;
  auto add = [&](const std::string& w) {
    if (std::find(words.begin(), words.end(), w) == words.end()) words.push_back(w);
  };
  std::regex quoted("\"([^\"]*)\"");
  for (const config::KeyDoc& k : config::key_docs()) {
    add("\n[" + k.table + "]\n");
    add(k.key + " = ");
    add(dotted(k) + "=");
    for (std::sregex_iterator it(k.allowed.begin(), k.allowed.end(), quoted), end; it != end; ++it)
      add("\"" + (*it)[1].str() + "\"");
  }
  std::string block;
  for (const std::string& w : words) {  // libFuzzer's escapes: \xNN for a quote, a backslash, a non-printable
    block += '"';
    for (unsigned char ch : w)
      block += ch >= 32 && ch < 127 && ch != '"' && ch != '\\'
                   ? std::string(1, char(ch))
                   : str("\\x", "0123456789ABCDEF"[ch >> 4], "0123456789ABCDEF"[ch & 15]);
    block += "\"\n";
  }
  return block;
}

// The text between `begin` and `end` in `text` (npos when absent).
std::pair<size_t, size_t> between(const std::string& text, const std::string& begin, const std::string& end) {
  size_t b = text.find(begin);
  if (b == std::string::npos) return {std::string::npos, std::string::npos};
  b += begin.size();
  size_t e = text.find(end, b);
  return {b, e};
}

}  // namespace

TEST_CASE("config keys: every declared key has a type, a doc line and a unique name", "[config]") {
  std::set<std::string> seen;
  for (const config::KeyDoc& k : config::key_docs()) {
    INFO(dotted(k));
    CHECK(seen.insert(dotted(k)).second);
    CHECK(!k.type.empty());
    CHECK(!k.doc.empty());
    CHECK(!k.default_value.empty());
  }
  CHECK(seen.size() > 50);
  // `trainer list keys`
  auto entries = config::key_list_entries();
  REQUIRE(entries.size() == config::key_docs().size());
  CHECK(entries.front().first == "run.name");
}

TEST_CASE("config keys: a wrong type names the key and the expected type", "[config]") {
  const std::map<std::string, std::pair<std::string, std::string>> wrong = {
      {"integer", {"\"x\"", "must be an integer, got string"}},
      {"number", {"\"x\"", "must be a number, got string"}},
      {"boolean", {"3", "must be a boolean (true or false), got integer"}},
      {"string", {"3", "must be a string, got integer"}},
      {"path", {"3", "must be a string, got integer"}},
  };
  for (const config::KeyDoc& k : config::key_docs()) {
    auto w = wrong.find(k.type);
    if (w == wrong.end()) continue;
    INFO(dotted(k));
    std::string e = error_with({dotted(k) + "=" + w->second.first});
    CHECK_THAT(e, Contains("--set " + dotted(k) + "=") && Contains("'" + k.key + "' " + w->second.second));
  }
}

TEST_CASE("config keys: a value outside a fixed set lists the set", "[config]") {
  int sets = 0;
  for (const config::KeyDoc& k : config::key_docs()) {
    if (k.allowed.empty() || k.allowed[0] != '"' || k.type != "string") continue;
    if (dotted(k) == "run.device")
      continue;  // cuda:N is a pattern; its message says "expected auto, cpu, cuda or cuda:N"
    INFO(dotted(k));
    ++sets;
    std::string e = error_with({dotted(k) + "=\"no-such-value\"", "model.init=\"w.safetensors\""});
    std::string listed = std::regex_replace(k.allowed, std::regex("\""), "");
    CHECK_THAT(e, Contains("'" + k.key + "' is 'no-such-value', expected one of [" + listed + "]"));
  }
  CHECK(sets >= 10);
}

TEST_CASE("config keys: a misspelt key names the declared one", "[config]") {
  for (const config::KeyDoc& k : config::key_docs()) {
    if (k.key.size() < 5) continue;                        // (a short name's neighbours can be as near)
    if (k.table == "data" || k.table == "loss") continue;  // finished at setup, after their builders' keys
    INFO(dotted(k));
    std::string typo = k.key.substr(0, k.key.size() - 1);
    std::string e = error_with({k.table + "." + typo + "=1", "model.init=\"w.safetensors\""});
    CHECK_THAT(e, Contains("unknown key '" + typo + "'") && Contains("did you mean '" + k.key + "'?"));
  }
}

TEST_CASE("config keys: the resolved config holds each key at its declared default", "[config]") {
  config::RunConfig c = config::parse_run_config(kBase + "[train]\ngrad_clip = { max_norm = 1.0 }\n", "c.toml");
  const toml::table resolved = toml::parse(config::to_toml(c));
  for (const config::KeyDoc& k : config::key_docs()) {
    if (k.default_value == "unset" || k.default_value == "none" || k.default_value.find(' ') != std::string::npos)
      continue;
    if (k.table == "loss" || dotted(k) == "train.grad_clip.max_norm") continue;  // [loss] is written once built
    if (k.table == "model" && k.key != "activation_checkpointing") continue;  // the file given; the rest with init only
    INFO(dotted(k));
    const toml::node* n = resolved.at_path(dotted(k)).node();
    REQUIRE(n);
    const toml::table declared = toml::parse("v = " + k.default_value);
    std::ostringstream want, got;
    declared.get("v")->visit([&](auto&& v) { want << v; });
    n->visit([&](auto&& v) { got << v; });
    CHECK(got.str() == want.str());
  }
}

TEST_CASE("config keys: docs/config.md's key tables are the declarations'", "[config]") {
  const std::string path = kRepo + "/docs/config.md";
  std::string text = read_file(path);
  REQUIRE(!text.empty());
  for (const std::string& s : sections()) {
    INFO("docs/config.md, the table of [" << s << "]");
    const std::string begin = "<!-- keys: " + s + " -->\n", end = "<!-- /keys -->";
    auto [b, e] = between(text, begin, end);
    const std::string expected = config::key_table_markdown(s);
    if (writing() && b != std::string::npos && e != std::string::npos) text.replace(b, e - b, expected);
    REQUIRE(b != std::string::npos);
    REQUIRE(e != std::string::npos);
    // on a difference: the table to paste, or TRAINER_WRITE_CONFIG_DOCS=1 to write it
    CHECK(text.substr(b, e - b) == expected);
  }
  if (writing()) std::ofstream(path, std::ios::binary) << text;
}

TEST_CASE("config keys: the run_config fuzz dictionary holds every declared key", "[config]") {
  const std::string path = kRepo + "/tests/fuzz/dict/run_config.dict";
  std::string text = read_file(path);
  REQUIRE(!text.empty());
  const std::string begin =
      "# run_config_keys.def (tests/unit/test_config_keys.cpp writes this block; make_seeds.py keeps it)\n";
  const std::string end = "# end of run_config_keys.def\n";
  auto [b, e] = between(text, begin, end);
  const std::string expected = dict_block();
  if (writing()) {
    if (b == std::string::npos || e == std::string::npos)
      text = begin + expected + end + text;
    else
      text.replace(b, e - b, expected);
    std::ofstream(path, std::ios::binary) << text;
    std::tie(b, e) = between(text, begin, end);
  }
  REQUIRE(b != std::string::npos);
  REQUIRE(e != std::string::npos);
  CHECK(text.substr(b, e - b) == expected);
}

}  // namespace test_config_keys
