// The CPU random kernels (uniform_, normal_, dropout_mask) draw exactly the numbers of
// core/philox.h's philox_uniform_at / philox_normal_at (which the CUDA kernels use), for sizes and
// offsets that cut Philox blocks and thread chunks anywhere, at several pool sizes.
#include <catch2/catch.hpp>
#include <omp.h>
#include <cmath>
#include "core/philox.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace test_random_stream {

using namespace tr;

namespace {
Attrs stream(uint64_t seed, uint64_t offset, Attrs a) {
  a.set("seed", int64_t(seed));
  a.set("offset", int64_t(offset));
  return a;
}
}  // namespace

TEST_CASE("CPU random kernels equal philox_uniform_at / philox_normal_at element by element", "[random]") {
  const int saved = omp_get_max_threads();
  const uint64_t seed = 0x1234567890abcdefull;
  for (int nt : {1, 2, 3}) {
    omp_set_num_threads(nt);
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(67), int64_t(9001)}) {
      for (uint64_t off : {uint64_t(0), uint64_t(5), uint64_t(1) << 33}) {
        INFO("threads " << nt << " n " << n << " offset " << off);
        Tensor u = empty({n}, DType::F64), z = empty({n}, DType::F64);
        dispatch("uniform_", {u}, stream(seed, off, {{"low", -1.0}, {"high", 3.0}}));
        dispatch("normal_", {z}, stream(seed, off, {{"mean", 0.5}, {"std", 2.0}}));
        Tensor m = dispatch1("dropout_mask", {u}, stream(seed, off, {{"p", 0.3}}));
        // f32 takes its own vectorised kernel
        Tensor m32 = dispatch1("dropout_mask", {empty({n}, DType::F32)}, stream(seed, off, {{"p", 0.3}}));
        std::vector<double> uv = u.tolist(), zv = z.tolist(), mv = m.tolist(), m32v = m32.tolist();
        int64_t first_bad = -1;
        for (int64_t i = 0; i < n && first_bad < 0; ++i) {
          double pu = philox_uniform_at(seed, off, uint64_t(i));
          bool same = uv[size_t(i)] == -1.0 + 4.0 * pu &&
                      zv[size_t(i)] == 0.5 + 2.0 * philox_normal_at(seed, off, uint64_t(i)) &&
                      mv[size_t(i)] == (pu >= 0.3 ? 1.0 / 0.7 : 0.0) &&
                      m32v[size_t(i)] == double(pu >= 0.3 ? float(1.0 / 0.7) : 0.0f);
          if (!same) first_bad = i;
        }
        CHECK(first_bad == -1);
      }
    }
  }
  omp_set_num_threads(saved);
}

TEST_CASE("dropout_mask: the keep threshold is exact at p = k / 2^53 boundaries", "[random]") {
  // p a value U takes exactly: U >= p must keep it
  const uint64_t seed = 99, off = 0;
  double u0 = philox_uniform_at(seed, off, 0);
  Tensor like = empty({1}, DType::F64);
  CHECK(dispatch1("dropout_mask", {like}, stream(seed, off, {{"p", u0}})).item() > 0.0);
  CHECK(dispatch1("dropout_mask", {like}, stream(seed, off, {{"p", std::nextafter(u0, 1.0)}})).item() == 0.0);
}

}  // namespace test_random_stream
