// Attrs: the non-tensor arguments of an op (dims, keepdim, scalars), a small name -> value list.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <variant>
#include <vector>
#include "core/error.h"

namespace tr {

using AttrValue = std::variant<int64_t, double, bool, std::vector<int64_t>, std::string>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> kv) : kv_(kv) {}

  bool has(const char* key) const {
    for (auto& [k, v] : kv_)
      if (k == key) return true;
    return false;
  }
  template <typename T> const T& get(const char* key) const {
    for (auto& [k, v] : kv_) {
      if (k == key) {
        const T* p = std::get_if<T>(&v);
        TR_CHECK(p, "attribute '", key, "' has the wrong type");
        return *p;
      }
    }
    throw Error(tr::str("missing attribute '", key, "'"));
  }
  int64_t i(const char* key) const { return get<int64_t>(key); }
  double f(const char* key) const { return get<double>(key); }
  bool b(const char* key) const { return get<bool>(key); }
  const std::vector<int64_t>& ints(const char* key) const { return get<std::vector<int64_t>>(key); }
  const std::string& s(const char* key) const { return get<std::string>(key); }
  void set(const std::string& key, AttrValue v) {
    for (auto& [k, old] : kv_)
      if (k == key) {
        old = std::move(v);
        return;
      }
    kv_.emplace_back(key, std::move(v));
  }
  std::string str() const;

 private:
  std::vector<std::pair<std::string, AttrValue>> kv_;
};

}  // namespace tr
