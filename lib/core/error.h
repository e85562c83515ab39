// The one exception type of the library; messages carry the op, key or layer and what was expected.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tr {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// A device allocation that failed after the allocator freed its cache. Dispatch adds the op that
// asked for it (the innermost one: an op run by another op's kernel names itself first).
class OutOfMemoryError : public Error {
 public:
  explicit OutOfMemoryError(const std::string& what, bool names_op = false) : Error(what), names_op_(names_op) {}
  bool names_op() const { return names_op_; }

 private:
  bool names_op_;
};

namespace detail {
inline void str_append(std::ostringstream&) {}
template <typename T> void put(std::ostringstream& os, const std::vector<T>& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ']';
}
template <typename T> void put(std::ostringstream& os, const T& v) { os << v; }
template <typename T, typename... R> void str_append(std::ostringstream& os, const T& v, const R&... rest) {
  put(os, v);
  str_append(os, rest...);
}
}  // namespace detail

// Concatenates its arguments; vectors print as [a, b, c].
template <typename... A> std::string str(const A&... a) {
  std::ostringstream os;
  detail::str_append(os, a...);
  return os.str();
}

}  // namespace tr

#define TR_CHECK(cond, ...)                                 \
  do {                                                      \
    if (!(cond)) throw ::tr::Error(::tr::str(__VA_ARGS__)); \
  } while (0)
