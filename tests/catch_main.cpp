// The one Catch2 main of the test suite (compiled once; benchmarking enabled).
#define CATCH_CONFIG_MAIN
#define CATCH_CONFIG_ENABLE_BENCHMARKING
#include <catch2/catch.hpp>
