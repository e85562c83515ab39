// What the pointwise op tables (unary_ops.def, binary_ops.def, compare_ops.def, predicate_ops.def)
// name besides formulas: an op's dtype set and the parameter block its kernels read. Light (no
// Tensor): the CUDA kernels see it through ops/cuda/launch.h.
#pragma once
#include <cstdint>
#include <type_traits>

namespace tr {

// The dtypes an op's kernels take, spelled as the CPU's dispatch macros (TR_DISPATCH_<set>):
// NUMERIC every dtype but bool (integers computed in their own type), FLOAT f16 bf16 f32 f64.
enum class DtypeSet : uint8_t { NUMERIC, FLOAT };

// True when an op of set `s` has a formula in compute type A (an acc_t): FLOAT ops only in
// floating types, so the CUDA functors never instantiate exp(int).
template <typename A> constexpr bool computes_in(DtypeSet s) {
  return s != DtypeSet::FLOAT || std::is_floating_point_v<A>;
}

// The parameters of one launch, read once on the host from the op's attrs (and inputs) before
// the loop; the formula sees p0, p1 in its compute type and b0, b1 as they are. Their meaning is
// the op's (clamp: min, max, has_min, has_max; softplus: beta, threshold; add: alpha).
struct PointwiseParams {
  double p0 = 0, p1 = 0;
  bool b0 = false, b1 = false;
};

}  // namespace tr

// A table's parenthesised column without its parentheses: TR_UNPAREN (a, b) -> a, b
#define TR_UNPAREN(...) __VA_ARGS__
