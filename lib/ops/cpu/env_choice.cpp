#include "ops/cpu/env_choice.h"
#include <cstdlib>
#include <vector>
#include "core/error.h"

namespace tr::cpu {

std::string env_choice(const char* name, std::initializer_list<const char*> allowed, const std::string& fallback) {
  const char* e = std::getenv(name);
  if (e == nullptr) return fallback;
  const std::vector<std::string> values(allowed.begin(), allowed.end());
  for (const std::string& v : values)
    if (v == e) return v;
  std::string known;  // "a, b or c"
  for (size_t i = 0; i < values.size(); ++i)
    known += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ") + values[i];
  throw Error(str(name, "=", e, ": expected ", known));
}

}  // namespace tr::cpu
