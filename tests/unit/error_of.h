// error_of(f): the message of the tr::Error that f throws, or "(no error)" (for CHECK_THAT with
// Contains on error texts).
#pragma once
#include <string>
#include "core/error.h"

namespace tr::test {

template <typename F> std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) { return e.what(); }
  return "(no error)";
}

}  // namespace tr::test
