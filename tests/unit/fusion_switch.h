// backends::fusion() switched for one scope and restored at its exit, a throw included: how the
// fused-op tests run the composite chain they compare a fused op with. And a tensor's grad_fn by
// name ("" for none): which of the two made it.
#pragma once
#include <string>
#include <utility>
#include "autograd/node.h"
#include "core/tensor.h"
#include "ops/backends.h"

namespace tr::test {

class FusionSwitch {
 public:
  explicit FusionSwitch(bool enabled) : saved_(backends::fusion().enabled) { backends::fusion().enabled = enabled; }
  ~FusionSwitch() { backends::fusion().enabled = saved_; }
  FusionSwitch(const FusionSwitch&) = delete;
  FusionSwitch& operator=(const FusionSwitch&) = delete;

 private:
  bool saved_;
};

// f() with fusion off: the composite chain's result
template <typename F> auto unfused(const F& f) {
  FusionSwitch off(false);
  return f();
}

// f() with fusion off, then with it on: the composite's result and the fused op's
template <typename F> auto unfused_and_fused(const F& f) {
  auto composite = unfused(f);
  return std::make_pair(composite, f());
}

inline std::string grad_fn_name(const Tensor& t) { return t.grad_fn() ? t.grad_fn()->name() : ""; }

}  // namespace tr::test
