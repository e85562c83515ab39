// Element types, their sizes and names, type promotion, and the dispatch macros that
// turn a runtime DType into a C++ type.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>
#include "core/half.h"

namespace tr {

enum class DType : uint8_t { Bool, U8, I32, I64, F16, BF16, F32, F64 };
constexpr int kNumDTypes = 8;

inline constexpr size_t itemsize(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::U8: return 1;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::I32:
    case DType::F32: return 4;
    case DType::I64:
    case DType::F64: return 8;
  }
  return 0;
}
inline constexpr bool is_floating(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64;
}
// f16 or bf16: the low-precision floats that autocast runs products in
inline constexpr bool is_16bit(DType t) { return t == DType::F16 || t == DType::BF16; }
inline constexpr bool is_integral(DType t, bool include_bool = false) {
  return t == DType::U8 || t == DType::I32 || t == DType::I64 || (include_bool && t == DType::Bool);
}
// Short name ("float32") as torch prints it after "torch.".
const char* dtype_name(DType t);
DType dtype_from_name(const std::string& s);  // accepts "float32", "f32", "float", "bf16", ...

// torch.result_type for two tensors of equal priority.
DType promote_types(DType a, DType b);

template <typename T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::U8; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::I32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::I64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::F16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BF16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::F64; };

// Type in which arithmetic on T is carried out: f16/bf16 compute in f32.
template <typename T> struct acc_type { using type = T; };
template <> struct acc_type<Half> { using type = float; };
template <> struct acc_type<BFloat16> { using type = float; };
template <typename T> using acc_t = typename acc_type<T>::type;

[[noreturn]] void throw_dtype_unsupported(const char* what, DType t);

}  // namespace tr

#define TR_DTYPE_CASE(enumv, T, ...) \
  case ::tr::DType::enumv: {         \
    using scalar_t = T;              \
    __VA_ARGS__();                   \
    break;                           \
  }

// TR_DISPATCH_FLOAT(dtype, "op", [&] { ... scalar_t ... });
#define TR_DISPATCH_FLOAT(DT, NAME, ...)                \
  do {                                                  \
    switch (DT) {                                       \
      TR_DTYPE_CASE(F32, float, __VA_ARGS__)            \
      TR_DTYPE_CASE(F64, double, __VA_ARGS__)           \
      TR_DTYPE_CASE(F16, ::tr::Half, __VA_ARGS__)       \
      TR_DTYPE_CASE(BF16, ::tr::BFloat16, __VA_ARGS__)  \
      default: ::tr::throw_dtype_unsupported(NAME, DT); \
    }                                                   \
  } while (0)

#define TR_DISPATCH_NUMERIC(DT, NAME, ...)              \
  do {                                                  \
    switch (DT) {                                       \
      TR_DTYPE_CASE(F32, float, __VA_ARGS__)            \
      TR_DTYPE_CASE(F64, double, __VA_ARGS__)           \
      TR_DTYPE_CASE(F16, ::tr::Half, __VA_ARGS__)       \
      TR_DTYPE_CASE(BF16, ::tr::BFloat16, __VA_ARGS__)  \
      TR_DTYPE_CASE(I64, int64_t, __VA_ARGS__)          \
      TR_DTYPE_CASE(I32, int32_t, __VA_ARGS__)          \
      TR_DTYPE_CASE(U8, uint8_t, __VA_ARGS__)           \
      default: ::tr::throw_dtype_unsupported(NAME, DT); \
    }                                                   \
  } while (0)

#define TR_DISPATCH_ALL(DT, NAME, ...)                 \
  do {                                                 \
    switch (DT) {                                      \
      TR_DTYPE_CASE(F32, float, __VA_ARGS__)           \
      TR_DTYPE_CASE(F64, double, __VA_ARGS__)          \
      TR_DTYPE_CASE(F16, ::tr::Half, __VA_ARGS__)      \
      TR_DTYPE_CASE(BF16, ::tr::BFloat16, __VA_ARGS__) \
      TR_DTYPE_CASE(I64, int64_t, __VA_ARGS__)         \
      TR_DTYPE_CASE(I32, int32_t, __VA_ARGS__)         \
      TR_DTYPE_CASE(U8, uint8_t, __VA_ARGS__)          \
      TR_DTYPE_CASE(Bool, bool, __VA_ARGS__)           \
    }                                                  \
  } while (0)
