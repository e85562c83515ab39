// CUDA kernels of the pointwise ops: one functor per op family (the op picked at run time,
// so each family is one kernel per dtype), each calling the scalar formulas of
// ops/scalar_math.h that the CPU kernels use.
// The integer instantiations of the scalar formulas mirror the CPU's: math::abs / sign compare
// unsigned values with 0 (186), math::pow_scalar converts 0.5 to an integer (173).
#pragma nv_diag_suppress 186
#pragma nv_diag_suppress 173
#include "ops/cuda/loops.cuh"
#include "ops/scalar_math.h"

namespace tr::cuda {

namespace {

// y = op(x) computed in acc_t<T>; the float-only ops exist for f16/bf16/f32/f64.
template <typename T>
struct UnaryFn {
  using A = acc_t<T>;
  UnaryOp op;
  A p0, p1;
  bool b0, b1;
  __device__ T operator()(T xs) const {
    A x = A(xs);
    switch (op) {
      case UnaryOp::Neg: return T(math::neg(x));
      case UnaryOp::Abs: return T(math::abs(x));
      case UnaryOp::Sign: return T(math::sign(x));
      case UnaryOp::Relu: return T(math::relu(x));
      case UnaryOp::Clamp: return T(math::clamp(x, p0, p1, b0, b1));
      default: break;
    }
    if constexpr (std::is_floating_point_v<A>) {
      switch (op) {
        case UnaryOp::Exp: return T(math::exp(x));
        case UnaryOp::Log: return T(math::log(x));
        case UnaryOp::Sqrt: return T(math::sqrt(x));
        case UnaryOp::Rsqrt: return T(math::rsqrt(x));
        case UnaryOp::Sin: return T(math::sin(x));
        case UnaryOp::Cos: return T(math::cos(x));
        case UnaryOp::Erf: return T(math::erf(x));
        case UnaryOp::Tanh: return T(math::tanh(x));
        case UnaryOp::Sigmoid: return T(math::sigmoid(x));
        case UnaryOp::Silu: return T(math::silu(x));
        case UnaryOp::GeluErf: return T(math::gelu_erf(x));
        case UnaryOp::GeluTanh: return T(math::gelu_tanh(x));
        case UnaryOp::Softplus: return T(math::softplus(x, p0, p1));
        default: break;
      }
    }
    return xs;  // unreachable: the launcher checks op against dtype
  }
};

// y = op(x0, x1) computed in acc_t<T>.
template <typename T>
struct BinaryFn {
  using A = acc_t<T>;
  BinaryOp op;
  A alpha;
  __device__ T operator()(T as, T bs) const {
    A x = A(as), y = A(bs);
    switch (op) {
      case BinaryOp::Add: return T(math::add(x, y, alpha));
      case BinaryOp::Sub: return T(math::sub(x, y, alpha));
      case BinaryOp::Mul: return T(math::mul(x, y));
      case BinaryOp::Div: return T(math::div(x, y));
      case BinaryOp::Pow:
        // integer pow is double pow truncated, as std::pow(int, int) on the CPU
        if constexpr (std::is_integral_v<A>) return T(A(math::pow(double(x), double(y))));
        else return T(math::pow(x, y));
      case BinaryOp::PowScalar: return T(math::pow_scalar(x, y));
      case BinaryOp::Maximum: return T(math::maximum(x, y));
      case BinaryOp::Minimum: return T(math::minimum(x, y));
    }
    return as;
  }
};

template <typename T>
struct CompareFn {
  using A = acc_t<T>;
  CompareOp op;
  __device__ bool operator()(T as, T bs) const {
    A a = A(as), b = A(bs);
    switch (op) {
      case CompareOp::Eq: return a == b;
      case CompareOp::Ne: return a != b;
      case CompareOp::Lt: return a < b;
      case CompareOp::Le: return a <= b;
      case CompareOp::Gt: return a > b;
      case CompareOp::Ge: return a >= b;
    }
    return false;
  }
};

template <typename T>
struct PredicateFn {
  using A = acc_t<T>;
  PredicateOp op;
  __device__ bool operator()(T xs) const {
    switch (op) {
      case PredicateOp::LogicalNot: return !(float(xs) != 0.0f);
      case PredicateOp::IsNan: return A(xs) != A(xs);
      case PredicateOp::IsFinite:
        // x - x is 0 for finite x and NaN for inf and NaN
        if constexpr (std::is_floating_point_v<A>) return A(xs) - A(xs) == A(0);
        else return true;
    }
    return false;
  }
};

struct LogicalAndFn {
  __device__ bool operator()(bool a, bool b) const { return a && b; }
};

template <typename U>
struct WhereFn {
  __device__ U operator()(bool c, U a, U b) const { return c ? a : b; }
};

template <typename U>
struct IdentityFn {
  __device__ U operator()(U x) const { return x; }
};

// Unsigned type of `bytes` bytes: copies and selections move bits, whatever the dtype.
template <typename F>
void dispatch_size(size_t bytes, const char* name, const F& f) {
  switch (bytes) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    default: throw Error(str(name, ": unsupported element size ", bytes));
  }
}

// y = convert<dst>(x): one kernel per source dtype, the destination picked at run time.
template <typename Src>
__global__ void cast_kernel(ElementwiseArgs a, DType dst) {
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

void launch_unary(UnaryOp op, DType t, const UnaryParams& p, const ElementwiseArgs& a) {
  TR_DISPATCH_NUMERIC(t, "unary op", [&] {
    using A = acc_t<scalar_t>;
    UnaryFn<scalar_t> f{op, A(p.p0), A(p.p1), p.b0, p.b1};
    launch_elementwise<scalar_t, scalar_t>("unary_kernel", a, f);
  });
}

void launch_binary(BinaryOp op, DType t, double alpha, const ElementwiseArgs& a) {
  TR_DISPATCH_NUMERIC(t, "binary op", [&] {
    using A = acc_t<scalar_t>;
    BinaryFn<scalar_t> f{op, A(alpha)};
    launch_elementwise<scalar_t, scalar_t, scalar_t>("binary_kernel", a, f);
  });
}

void launch_compare(CompareOp op, DType t, const ElementwiseArgs& a) {
  TR_DISPATCH_ALL(t, "comparison", [&] {
    launch_elementwise<bool, scalar_t, scalar_t>("compare_kernel", a, CompareFn<scalar_t>{op});
  });
}

void launch_predicate(PredicateOp op, DType t, const ElementwiseArgs& a) {
  TR_DISPATCH_ALL(t, "predicate", [&] {
    launch_elementwise<bool, scalar_t>("predicate_kernel", a, PredicateFn<scalar_t>{op});
  });
}

void launch_logical_and(const ElementwiseArgs& a) {
  launch_elementwise<bool, bool, bool>("logical_and_kernel", a, LogicalAndFn{});
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
    cast_kernel<scalar_t><<<grid_for(a.numel), kThreads>>>(a, dst);
    TR_CUDA_CHECK_LAUNCH("cast_kernel");
  });
}

}  // namespace tr::cuda
