// Sets or unsets environment variables for one test and restores them at scope exit.
#pragma once
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

struct EnvGuard {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  void set(const std::string& k, const std::optional<std::string>& v) {
    const char* old = std::getenv(k.c_str());
    saved.push_back({k, old ? std::optional<std::string>(old) : std::nullopt});
    if (v)
      ::setenv(k.c_str(), v->c_str(), 1);
    else
      ::unsetenv(k.c_str());
  }
  ~EnvGuard() {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it)
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
  }
};
