// CPU kernels of the Philox random fills (same formulas as the CUDA kernels, core/philox.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include "core/philox.h"
#include "ops/cpu/loops.h"
#include "ops/registry.h"

namespace tr::cpu {

namespace {

// Philox blocks counter0 .. counter0 + kBatch - 1 of `seed`: w[k][j] is word k of block j (the
// loop of philox4x32_10, across blocks, so it vectorises).
constexpr int kBatch = 16;
void philox_batch(uint64_t seed, uint64_t counter0, uint32_t (&w)[4][kBatch]) {
  const uint32_t key0 = uint32_t(seed), key1 = uint32_t(seed >> 32);
#pragma omp simd
  for (int j = 0; j < kBatch; ++j) {
    const uint64_t counter = counter0 + uint64_t(j);
    uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0, k0 = key0, k1 = key1;
    for (int r = 0; r < 10; ++r) {
      const uint64_t p0 = uint64_t(0xD2511F53u) * c0, p1 = uint64_t(0xCD9E8D57u) * c2;
      const uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
      c1 = uint32_t(p1);
      c3 = uint32_t(p0);
      c0 = n0;
      c2 = n2;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    w[0][j] = c0;
    w[1][j] = c1;
    w[2][j] = c2;
    w[3][j] = c3;
  }
}

using Words = uint32_t[4][kBatch];

// t[i] = f(w, j, k) for element i = 4 (j0 + j) + k, where w[k][j] are the words of
// philox4x32_10(seed, offset + j0 + j), as philox_uniform_at / philox_normal_at read them; blocks are
// made kBatch at a time and each word k is mapped across the blocks (a loop over j the compiler can
// vectorise where f is simple, as the dropout mask's comparison).
template <typename F> void fill_stream(const Tensor& t, uint64_t seed, uint64_t offset, const F& f) {
  Tensor c = t.is_contiguous() ? t : empty_like(t);
  TR_DISPATCH_FLOAT(t.dtype(), "random", [&] {
    scalar_t* p = c.data_ptr<scalar_t>();
    parallel_for(c.numel(), 4096, [&](int64_t b, int64_t e) {
      Words w;
      scalar_t v[kBatch * 4];
      for (int64_t j0 = b / 4; j0 * 4 < e; j0 += kBatch) {
        philox_batch(seed, offset + uint64_t(j0), w);
        for (unsigned k = 0; k < 4; ++k)
          for (int j = 0; j < kBatch; ++j) v[j * 4 + int(k)] = scalar_t(acc_t<scalar_t>(f(w, j, k)));
        const int64_t i0 = std::max(b, j0 * 4), i1 = std::min(e, (j0 + kBatch) * 4);
        std::memcpy(p + i0, v + (i0 - j0 * 4), size_t(i1 - i0) * sizeof(scalar_t));
      }
    });
  });
  if (!c.is_same(t)) t.detach().copy_(c);
}

// philox_uniform_at: 53 bits from words k and k + 1 of block j
inline uint64_t bits53(const Words& w, int j, unsigned k) {
  return ((uint64_t(w[k][j]) << 21) ^ uint64_t(w[(k + 1) % 4][j] >> 11)) & ((uint64_t(1) << 53) - 1);
}
inline double uniform_in(const Words& w, int j, unsigned k) {
  return double(bits53(w, j, k)) * (1.0 / 9007199254740992.0);
}
// philox_normal_at: Box-Muller on words (0, 1) for k = 0, 1 and (2, 3) for k = 2, 3
inline double normal_in(const Words& w, int j, unsigned k) {
  unsigned pair = k / 2;
  double u1 = (double(w[2 * pair][j]) + 1.0) * (1.0 / 4294967297.0);  // (0, 1]
  double u2 = double(w[2 * pair + 1][j]) * (1.0 / 4294967296.0);      // [0, 1)
  double r = std::sqrt(-2.0 * std::log(u1));
  double t = 6.283185307179586 * u2;
  return (k % 2 == 0) ? r * std::cos(t) : r * std::sin(t);
}

void uniform_cpu(const std::vector<Tensor>& in, std::vector<Tensor>&, const Attrs& a) {
  uint64_t seed = uint64_t(a.i("seed")), off = uint64_t(a.i("offset"));
  double lo = a.f("low"), hi = a.f("high");
  fill_stream(in[0], seed, off,
              [&](const Words& w, int j, unsigned k) { return lo + (hi - lo) * uniform_in(w, j, k); });
}
void normal_cpu(const std::vector<Tensor>& in, std::vector<Tensor>&, const Attrs& a) {
  uint64_t seed = uint64_t(a.i("seed")), off = uint64_t(a.i("offset"));
  double m = a.f("mean"), s = a.f("std");
  fill_stream(in[0], seed, off, [&](const Words& w, int j, unsigned k) { return m + s * normal_in(w, j, k); });
}
// keep where U >= p, i.e. where the 53-bit integer behind U = bits / 2^53 is >= ceil(p 2^53) (exact)
void dropout_mask_cpu(const std::vector<Tensor>&, std::vector<Tensor>& out, const Attrs& a) {
  uint64_t seed = uint64_t(a.i("seed")), off = uint64_t(a.i("offset"));
  double p = a.f("p"), scale = 1.0 / (1.0 - p);
  const uint64_t keep_from = uint64_t(std::ceil(p * 9007199254740992.0));
  fill_stream(out[0], seed, off,
              [&](const Words& w, int j, unsigned k) { return bits53(w, j, k) >= keep_from ? scale : 0.0; });
}
TR_REGISTER_KERNEL(uniform_, CPU, uniform_cpu);
TR_REGISTER_KERNEL(normal_, CPU, normal_cpu);
TR_REGISTER_KERNEL(dropout_mask, CPU, dropout_mask_cpu);

}  // namespace
}  // namespace tr::cpu
