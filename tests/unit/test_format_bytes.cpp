#include <catch2/catch.hpp>
#include "core/format_bytes.h"

namespace test_format_bytes {

using tr::format_bytes;

TEST_CASE("format_bytes: the largest unit that keeps the value at least 1, or a fixed one", "[core]") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(1024) == "1.00 KiB");
  CHECK(format_bytes(4096, 2) == "4.00 KiB");
  CHECK(format_bytes(1600, 1) == "1.6 KiB");
  CHECK(format_bytes(20.0 * (1 << 20)) == "20.00 MiB");
  CHECK(format_bytes(1.5 * (1 << 30), 1) == "1.5 GiB");
  CHECK(format_bytes(3.0 * (1ull << 40) * 2048) == "6144.00 TiB");  // TiB is the largest unit
  // a fixed unit: a table's rows in one unit, small ones included
  CHECK(format_bytes(512 * 1024, 1, "MiB") == "0.5 MiB");
  CHECK(format_bytes(3.0 * (1 << 30), 1, "MiB") == "3072.0 MiB");
}

}  // namespace test_format_bytes
