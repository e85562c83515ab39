#include "ops/backends.h"

namespace tr::backends {

Cudnn& cudnn() {
  static Cudnn c;
  return c;
}
Matmul& matmul() {
  static Matmul m;
  return m;
}
Fusion& fusion() {
  static Fusion f;
  return f;
}

}  // namespace tr::backends
