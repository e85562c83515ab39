// Shape rules shared by ops of several files (an OpDef's infer).
#pragma once
#include <vector>
#include "ops/registry.h"

namespace tr {

// One output with input 0's shape and dtype.
inline std::vector<TensorSpec> infer_same(const std::vector<Tensor>& in, const Attrs&) {
  return {{in[0].sizes(), in[0].dtype()}};
}

}  // namespace tr
