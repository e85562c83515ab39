#include "core/format_bytes.h"
#include <cstdio>
#include <cstring>

namespace tr {

std::string format_bytes(double bytes, int decimals, const char* unit) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  if (unit) {
    while (u < 4 && std::strcmp(units[u], unit) != 0) ++u;
    for (int i = 0; i < u; ++i) bytes /= 1024;
  } else {
    for (; bytes >= 1024 && u < 4; ++u) bytes /= 1024;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f %s", u ? decimals : 0, bytes, units[u]);
  return buf;
}

}  // namespace tr
