// Skips a [gpu] test, visibly, on a machine without a usable GPU (scripts/test.sh counts the
// "no CUDA device" lines).
#pragma once
#include <catch2/catch.hpp>
#include "core/cuda_hooks.h"

#define TR_REQUIRE_GPU()                                            \
  do {                                                              \
    if (::tr::cuda::device_count() == 0) {                          \
      WARN("no CUDA device: " << ::tr::cuda::unavailable_reason()); \
      return;                                                       \
    }                                                               \
  } while (0)
