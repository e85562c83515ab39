// A typed value of a JSON object being loaded (a scheduler's or a GradScaler's state dict): a
// missing key or a value of another kind is one Error naming `who` and the key. Integers must be
// JSON integers (2.5 is not silently truncated), numbers any JSON number, booleans and strings
// their own kinds; other types (lists, json) go through nlohmann's conversion.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include "core/error.h"

namespace tr::optim {

template <typename T> T json_field(const nlohmann::json& s, const char* key, const std::string& who) {
  TR_CHECK(s.is_object(), who, ": expected a JSON object, got ", s.type_name());
  auto it = s.find(key);
  TR_CHECK(it != s.end(), who, ": missing key '", key, "'");
  const nlohmann::json& v = *it;
  auto wrong = [&](const char* expected) {
    return Error(str(who, ": key '", key, "' must be ", expected, ", got ", v.type_name(),
                     v.is_primitive() ? " " + v.dump() : std::string()));
  };
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) throw wrong("a boolean");
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) throw wrong("an integer");
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) throw wrong("a number");
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) throw wrong("a string");
  }
  try {
    return v.get<T>();
  } catch (const nlohmann::json::exception& e) { throw Error(str(who, ": key '", key, "': ", e.what())); }
}

}  // namespace tr::optim
