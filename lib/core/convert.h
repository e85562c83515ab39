// convert<To>(From): the element conversion every kernel uses (CPU and CUDA alike): bool is
// "!= 0 as float", f16/bf16 go through f32, everything else is static_cast.
#pragma once
#include <type_traits>
#include "core/half.h"
#include "core/macros.h"

namespace tr {

template <typename To, typename From> TR_HD To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return static_cast<float>(v) != 0.0f;
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return static_cast<To>(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace tr
