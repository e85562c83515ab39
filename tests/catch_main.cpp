// The one Catch2 main of the test suite (compiled once; benchmarking enabled).
#define CATCH_CONFIG_MAIN  // CATCH_CONFIG_ENABLE_BENCHMARKING comes from CMake
#include <catch2/catch.hpp>
