// Reference values from PyTorch: tests/fixtures/<name>, written by the make_*.py script beside it.
#pragma once
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

// The parsed JSON fixture `name` ("optim_fixtures.json"), read once per test binary.
inline const nlohmann::json& fixture_json(const std::string& name) {
  static std::map<std::string, nlohmann::json> loaded;
  auto it = loaded.find(name);
  if (it != loaded.end()) return it->second;
  const std::string path = std::string(TRAINER_FIXTURES_DIR) + "/" + name;
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path + " (made by a script in tests/fixtures/)");
  return loaded.emplace(name, nlohmann::json::parse(f)).first->second;
}
