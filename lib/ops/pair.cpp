#include "ops/pair.h"
#include "core/error.h"

namespace tr {

Pair expand_pair(const Pair& p, const char* who, const char* name, int64_t lo) {
  TR_CHECK(p.size() == 1 || p.size() == 2, who, ": ", name, " must have 1 or 2 values {h, w}, got ", p);
  Pair r = p.size() == 1 ? Pair{p[0], p[0]} : p;
  TR_CHECK(r[0] >= lo && r[1] >= lo, who, ": ", name, " must be >= ", lo, ", got ", p);
  return r;
}

}  // namespace tr
