// The floors of lib/ [architecture]: every #include "folder/..." in lib/ and app/ must be allowed
// by the table in docs/architecture.md (the one place the directions are written; the build links
// by the same table). A violation names the file, the line, the include and the rule.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace test_architecture {

namespace fs = std::filesystem;

namespace {

using FloorTable = std::map<std::string, std::set<std::string>>;  // folder -> folders it may include

fs::path source_dir() { return fs::path(TRAINER_FIXTURES_DIR).parent_path().parent_path(); }

// The rows "| `folder` | what | `dep`, `dep` |" of docs/architecture.md.
FloorTable read_floor_table(const std::string& markdown) {
  FloorTable t;
  const std::regex row(R"(^\| `([a-z_]+)` \|[^|]*\|([^|]*)\|)"), dep("`([a-z_]+)`");
  std::istringstream in(markdown);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    std::set<std::string>& deps = t[m[1].str()];
    const std::string cell = m[2].str();
    for (std::sregex_iterator it(cell.begin(), cell.end(), dep), end; it != end; ++it) deps.insert((*it)[1].str());
  }
  return t;
}

// The violations in one source file of `folder`: includes of a folder the table does not allow.
std::vector<std::string> check_includes(const FloorTable& t, const std::string& folder, const std::string& file,
                                        const std::string& text) {
  std::vector<std::string> bad;
  const std::regex include(R"(^\s*#\s*include\s*"([^"/]+)/[^"]*")");
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    std::smatch m;
    if (!std::regex_search(line, m, include)) continue;
    const std::string target = m[1].str();
    if (target == folder) continue;
    const auto& allowed = t.at(folder);
    if (!t.count(target))
      bad.push_back(file + ":" + std::to_string(n) + ": includes \"" + target +
                    "/...\", which is no floor of docs/architecture.md");
    else if (!allowed.count(target))
      bad.push_back(file + ":" + std::to_string(n) + ": " + folder + " may not include " + target + " (" +
                    line.substr(line.find('#')) + "); docs/architecture.md lets " + folder +
                    " use only what is below it");
  }
  return bad;
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

FloorTable the_table() { return read_floor_table(read(source_dir() / "docs" / "architecture.md")); }

}  // namespace

TEST_CASE("architecture: the floor table is complete and acyclic, with core as the ground floor", "[architecture]") {
  const FloorTable t = the_table();
  REQUIRE(t.count("core"));
  CHECK(t.at("core").empty());
  for (const auto& e : fs::directory_iterator(source_dir() / "lib"))
    if (e.is_directory()) {
      INFO("lib/" << e.path().filename().string() << " must have a row in docs/architecture.md");
      CHECK(t.count(e.path().filename().string()));
    }
  for (const auto& [folder, deps] : t)
    for (const auto& d : deps) {
      INFO(folder << " may include " << d << ", which has no row");
      CHECK(t.count(d));
    }
  // acyclic: peel off floors whose dependencies are all peeled
  std::set<std::string> placed;
  for (bool progress = true; progress;) {
    progress = false;
    for (const auto& [folder, deps] : t) {
      if (placed.count(folder)) continue;
      bool ready = true;
      for (const auto& d : deps) ready = ready && (placed.count(d) || !t.count(d));
      if (ready) progress = placed.insert(folder).second;
    }
  }
  CHECK(placed.size() == t.size());
}

TEST_CASE("architecture: every include of lib/ and app/ runs downward", "[architecture]") {
  const FloorTable t = the_table();
  std::vector<std::string> bad;
  int files = 0;
  for (const std::string top : {"lib", "app"}) {
    for (const auto& e : fs::recursive_directory_iterator(source_dir() / top)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".cuh" && ext != ".def"))
        continue;
      const fs::path rel = fs::relative(e.path(), source_dir());
      const std::string folder = top == "app" ? "app" : (*std::next(rel.begin())).string();
      if (!t.count(folder)) continue;  // reported by the completeness test
      ++files;
      for (auto& v : check_includes(t, folder, rel.string(), read(e.path()))) bad.push_back(v);
    }
  }
  CHECK(files > 100);
  std::string report;
  for (auto& v : bad) report += v + "\n";
  INFO(report);
  CHECK(bad.empty());
}

TEST_CASE("architecture: the include check fails on a forbidden include", "[architecture]") {
  const FloorTable t = the_table();
  const auto bad =
      check_includes(t, "core", "lib/core/tensor.cpp", "#include \"core/tensor.h\"\n#include \"ops/ops.h\"\n");
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].find("lib/core/tensor.cpp:2: core may not include ops") == 0);
  CHECK(check_includes(t, "ops", "lib/ops/x.cpp", "#include \"core/tensor.h\"\n").empty());
  CHECK(check_includes(t, "nn", "lib/nn/x.cpp", "#  include \"train/trainer.h\"\n").size() == 1);
  CHECK(check_includes(t, "nn", "lib/nn/x.cpp", "#include \"misc/x.h\"\n")[0].find("no floor") != std::string::npos);
}

}  // namespace test_architecture
