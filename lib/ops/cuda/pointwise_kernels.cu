// CUDA kernels of the pointwise ops: one functor per op family (the op picked at run time,
// so each family is one kernel per dtype) whose switch has a case per line of the family's table
// (ops/*_ops.def), calling the scalar formulas of ops/scalar_math.h that the CPU kernels use.
// The integer instantiations of the scalar formulas mirror the CPU's: math::abs / sign compare
// unsigned values with 0 (186), math::pow_scalar converts 0.5 to an integer (173).
#pragma nv_diag_suppress 186
#pragma nv_diag_suppress 173
#include "ops/cuda/loops.cuh"
#include "ops/scalar_math.h"

namespace tr::cuda {

namespace {

// y = op(x) computed in acc_t<T>: the formula of the op's line in unary_ops.def. FLOAT ops have
// no case body in integer types (the launcher rejects them there).
template <typename T> struct UnaryFn {
  using A = acc_t<T>;
  UnaryOp op;
  A p0, p1;
  bool b0, b1;
  __device__ T operator()(T xs) const {
    A x = A(xs);
    switch (op) {
#define TR_UNARY_OP(NAME, OP, DTYPES, AUTOCAST, PARAMS, FORMULA, F32X8) \
  case UnaryOp::OP:                                                     \
    if constexpr (computes_in<A>(DtypeSet::DTYPES)) return T(FORMULA);  \
    break;
#include "ops/unary_ops.def"
    }
    return xs;  // unreachable: the launcher checks op against dtype
  }
};

// y = op(x0, x1) computed in acc_t<T>: the formula of the op's line in binary_ops.def.
template <typename T> struct BinaryFn {
  using A = acc_t<T>;
  BinaryOp op;
  A p0, p1;
  bool b0, b1;
  __device__ T operator()(T as, T bs) const {
    A x = A(as), y = A(bs);
    switch (op) {
#define TR_BINARY_OP(NAME, OP, DTYPES, AUTOCAST, PARAMS, FORMULA)      \
  case BinaryOp::OP:                                                   \
    if constexpr (computes_in<A>(DtypeSet::DTYPES)) return T(FORMULA); \
    break;
#include "ops/binary_ops.def"
    }
    return as;  // unreachable: the launcher checks op against dtype
  }
};

// bool y = x0 OPERATOR x1 in acc_t<T> (compare_ops.def).
template <typename T> struct CompareFn {
  using A = acc_t<T>;
  CompareOp op;
  __device__ bool operator()(T as, T bs) const {
    A a = A(as), b = A(bs);
    switch (op) {
// (clang-format would join the #include to the macro's last line)
// clang-format off
#define TR_COMPARE_OP(NAME, OP, OPERATOR) \
  case CompareOp::OP: return a OPERATOR b;
#include "ops/compare_ops.def"
      // clang-format on
    }
    return false;
  }
};

// bool y = formula(x), x in acc_t<T> (predicate_ops.def).
template <typename T> struct PredicateFn {
  using A = acc_t<T>;
  PredicateOp op;
  __device__ bool operator()(T xs) const {
    A x = A(xs);
    switch (op) {
// (clang-format would join the #include to the macro's last line)
// clang-format off
#define TR_PREDICATE_OP(NAME, OP, FORMULA) \
  case PredicateOp::OP: return FORMULA;
#include "ops/predicate_ops.def"
      // clang-format on
    }
    return false;
  }
};

struct LogicalAndFn {
  __device__ bool operator()(bool a, bool b) const { return a && b; }
};

template <typename T> struct ThresholdBackwardFn {
  acc_t<T> threshold;
  __device__ T operator()(T g, T y) const { return T(math::threshold_backward(acc_t<T>(g), acc_t<T>(y), threshold)); }
};
template <typename T> struct GeluBackwardFn {
  bool tanh_form;
  __device__ T operator()(T g, T x) const {
    using A = acc_t<T>;
    return T(tanh_form ? math::gelu_backward_tanh(A(g), A(x)) : math::gelu_backward_erf(A(g), A(x)));
  }
};
template <typename U> struct WhereFn {
  __device__ U operator()(bool c, U a, U b) const { return c ? a : b; }
};

template <typename U> struct IdentityFn {
  __device__ U operator()(U x) const { return x; }
};

// Unsigned type of `bytes` bytes: copies and selections move bits, whatever the dtype.
template <typename F> void dispatch_size(size_t bytes, const char* name, const F& f) {
  switch (bytes) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    default: throw Error(str(name, ": unsupported element size ", bytes));
  }
}

// y = convert<dst>(x): one kernel per source dtype, the destination picked at run time.
template <typename Src> __global__ void cast_kernel(ElementwiseArgs a, DType dst) {
  const int64_t step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.numel; i += step) {
    int64_t off[2];
    elementwise_offsets<2>(a, i, off);
    Src v = load_operand<Src>(a, 1, off[1]);
    void* o = a.ptr[0];
    switch (dst) {
      case DType::Bool: static_cast<bool*>(o)[off[0]] = convert<bool>(v); break;
      case DType::U8: static_cast<uint8_t*>(o)[off[0]] = convert<uint8_t>(v); break;
      case DType::I32: static_cast<int32_t*>(o)[off[0]] = convert<int32_t>(v); break;
      case DType::I64: static_cast<int64_t*>(o)[off[0]] = convert<int64_t>(v); break;
      case DType::F16: static_cast<Half*>(o)[off[0]] = convert<Half>(v); break;
      case DType::BF16: static_cast<BFloat16*>(o)[off[0]] = convert<BFloat16>(v); break;
      case DType::F32: static_cast<float*>(o)[off[0]] = convert<float>(v); break;
      case DType::F64: static_cast<double*>(o)[off[0]] = convert<double>(v); break;
    }
  }
}

}  // namespace

void launch_unary(UnaryOp op, DType t, const PointwiseParams& p, const ElementwiseArgs& a) {
  TR_DISPATCH_NUMERIC(t, "unary op", [&] {
    using A = acc_t<scalar_t>;
    UnaryFn<scalar_t> f{op, A(p.p0), A(p.p1), p.b0, p.b1};
    launch_elementwise<scalar_t, scalar_t>("unary_kernel", a, f);
  });
}

void launch_binary(BinaryOp op, DType t, const PointwiseParams& p, const ElementwiseArgs& a) {
  TR_DISPATCH_NUMERIC(t, "binary op", [&] {
    using A = acc_t<scalar_t>;
    BinaryFn<scalar_t> f{op, A(p.p0), A(p.p1), p.b0, p.b1};
    launch_elementwise<scalar_t, scalar_t, scalar_t>("binary_kernel", a, f);
  });
}

void launch_binary_mixed(BinaryOp op, DType ta, DType tb, const PointwiseParams& p, const ElementwiseArgs& a) {
  const BinaryFn<float> f{op, float(p.p0), float(p.p1), p.b0, p.b1};
  // the 16-bit operand converts to f32 exactly inside BinaryFn<float>: the cast it replaces
  if (ta == DType::F32 && tb == DType::BF16)
    launch_elementwise<float, float, BFloat16>("binary_kernel", a, f);
  else if (ta == DType::BF16 && tb == DType::F32)
    launch_elementwise<float, BFloat16, float>("binary_kernel", a, f);
  else if (ta == DType::F32 && tb == DType::F16)
    launch_elementwise<float, float, Half>("binary_kernel", a, f);
  else if (ta == DType::F16 && tb == DType::F32)
    launch_elementwise<float, Half, float>("binary_kernel", a, f);
  else
    throw Error(str("binary op: no mixed kernel for ", dtype_name(ta), " and ", dtype_name(tb)));
}

void launch_compare(CompareOp op, DType t, const ElementwiseArgs& a) {
  TR_DISPATCH_ALL(t, "comparison",
                  [&] { launch_elementwise<bool, scalar_t, scalar_t>("compare_kernel", a, CompareFn<scalar_t>{op}); });
}

void launch_predicate(PredicateOp op, DType t, const ElementwiseArgs& a) {
  TR_DISPATCH_ALL(t, "predicate",
                  [&] { launch_elementwise<bool, scalar_t>("predicate_kernel", a, PredicateFn<scalar_t>{op}); });
}

void launch_logical_and(const ElementwiseArgs& a) {
  launch_elementwise<bool, bool, bool>("logical_and_kernel", a, LogicalAndFn{});
}

void launch_threshold_backward(DType t, double threshold, const ElementwiseArgs& a) {
  TR_DISPATCH_NUMERIC(t, "threshold_backward", [&] {
    launch_elementwise<scalar_t, scalar_t, scalar_t>("threshold_backward_kernel", a,
                                                     ThresholdBackwardFn<scalar_t>{acc_t<scalar_t>(threshold)});
  });
}

void launch_gelu_backward(DType t, bool tanh_form, const ElementwiseArgs& a) {
  TR_DISPATCH_FLOAT(t, "gelu_backward", [&] {
    launch_elementwise<scalar_t, scalar_t, scalar_t>("gelu_backward_kernel", a, GeluBackwardFn<scalar_t>{tanh_form});
  });
}

void launch_where(size_t elem_size, const ElementwiseArgs& a) {
  dispatch_size(elem_size, "where", [&](auto u) {
    using U = decltype(u);
    launch_elementwise<U, bool, U, U>("where_kernel", a, WhereFn<U>{});
  });
}

void launch_copy(size_t elem_size, const ElementwiseArgs& a) {
  dispatch_size(elem_size, "copy_", [&](auto u) {
    using U = decltype(u);
    launch_elementwise<U, U>("copy_kernel", a, IdentityFn<U>{});
  });
}

void launch_cast(DType dst, DType src, const ElementwiseArgs& a) {
  if (a.numel == 0) return;
  TR_DISPATCH_ALL(src, "cast", [&] {
    launch_kernel(cast_kernel<scalar_t>, grid_for(a.numel), kThreads, a, dst);
    TR_CUDA_CHECK_LAUNCH("cast_kernel");
  });
}

}  // namespace tr::cuda
