// Sizes for people, one formatter for every message and table that prints bytes.
#pragma once
#include <string>

namespace tr {

// "512 B", "1.50 KiB", "30.00 MiB" (decimals = 1: "1.6 KiB"): the largest binary unit (up to TiB) that keeps
// the value at least 1, with `decimals` digits after the point from KiB up. A fixed `unit`
// ("KiB", "MiB", "GiB", "TiB") prints every value in it, so that a table's rows compare.
std::string format_bytes(double bytes, int decimals = 2, const char* unit = nullptr);

}  // namespace tr
