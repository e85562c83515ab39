// Registry<T>: the one way a name becomes a thing. Ops, layer types, optimizers, schedulers,
// datasets, transforms and losses are each a Registry<Entry> keyed by the name a config (or an
// op call) uses. Entries register themselves from their own file at static-initialisation time:
//
//   static const Registrar<LayerType> linear_layer("linear", {build_linear, "out_features, bias = true"});
//
// and an unknown name is one error, the same for every kind: what was asked for, the nearest
// known name and every known name. Entry types name their kind for messages:
//   static constexpr const char* kRegistryKind = "layer type";
// (Registering from a static library would let the linker drop the registrations: lib/ is linked
// as object files.)
#pragma once
#include <map>
#include <string>
#include <vector>
#include "core/error.h"

namespace tr {

// The candidate closest to `name` by edit distance, or "" when none is close (distance >
// max(2, len/3)): the "did you mean" of unknown keys and names.
std::string nearest_name(const std::string& name, const std::vector<std::string>& candidates);

template <typename T> class Registry {
 public:
  static Registry& get() {
    static Registry r;
    return r;
  }
  static constexpr const char* kind() { return T::kRegistryKind; }

  // Registers `name`; a name registered twice is an error naming it (two files claim it).
  T& add(const std::string& name, T entry) {
    auto [it, fresh] = entries_.emplace(name, std::move(entry));
    TR_CHECK(fresh, kind(), " '", name, "' is registered twice");
    return it->second;
  }
  // The entry of `name`, default-constructed on first use: for entries whose parts register from
  // several files in any order (an op's definition and its per-device kernels).
  T& entry(const std::string& name) { return entries_[name]; }

  const T* find(const std::string& name) const {
    auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second;
  }
  // The entry of `name`; an unknown name throws "<where>: <unknown_message(name)>".
  const T& at(const std::string& name, const std::string& where = "") const {
    if (const T* e = find(name)) return *e;
    throw Error(where.empty() ? unknown_message(name) : where + ": " + unknown_message(name));
  }
  // "unknown layer type 'lineer'; did you mean 'linear'? (known: conv2d, linear, relu)"
  std::string unknown_message(const std::string& name) const {
    const std::vector<std::string> known = names();
    const std::string near = nearest_name(name, known);
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    return str("unknown ", kind(), " '", name, "'", near.empty() ? "" : "; did you mean '" + near + "'?",
               " (known: ", list, ")");
  }

  std::vector<std::string> names() const {
    std::vector<std::string> r;
    for (const auto& [k, v] : entries_) r.push_back(k);
    return r;
  }
  const std::map<std::string, T>& all() const { return entries_; }

 private:
  Registry() = default;
  std::map<std::string, T> entries_;
};

// Registers one entry at static-initialisation time (a namespace-scope `static const` object).
// Each kind wraps it in a macro (TR_REGISTER_LAYER, TR_REGISTER_OPTIMIZER, ...) that names the
// object by a counter, unique within a translation unit (unity builds join files): for example
// TR_REGISTRY_CONCAT(tr_loss_registrar_, __COUNTER__).
template <typename T> struct Registrar {
  Registrar(const char* name, T entry) { Registry<T>::get().add(name, std::move(entry)); }
};

#define TR_REGISTRY_CONCAT_(a, b) a##b
#define TR_REGISTRY_CONCAT(a, b) TR_REGISTRY_CONCAT_(a, b)

}  // namespace tr
