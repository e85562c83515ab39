// Philox4x32-10 counter-based generator (Salmon et al. 2011): random numbers are a pure function
// of (seed, counter), so CPU threads and CUDA kernels produce the same stream.
#pragma once
#include <cmath>
#include <cstdint>
#include "core/macros.h"

namespace tr {

struct Philox4 {
  uint32_t v[4];
};

TR_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = uint64_t(a) * uint64_t(b);
  hi = uint32_t(p >> 32);
  lo = uint32_t(p);
}

// Block `counter` of the stream keyed by `seed`: 4 uniformly distributed 32-bit words.
TR_HD Philox4 philox4x32_10(uint64_t seed, uint64_t counter) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(0xD2511F53u, c0, hi0, lo0);
    philox_mulhilo(0xCD9E8D57u, c2, hi1, lo1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// Uniform in [0, 1) with 24 random bits (exactly representable in f32).
TR_HD float philox_uniform(uint32_t w) { return float(w >> 8) * (1.0f / 16777216.0f); }
// Uniform in [0, 1) with 53 random bits, from two words.
TR_HD double philox_uniform_f64(uint32_t a, uint32_t b) {
  uint64_t x = (uint64_t(a) << 21) ^ uint64_t(b >> 11);
  return double(x & ((uint64_t(1) << 53) - 1)) * (1.0 / 9007199254740992.0);
}

// Element i of a stream of n values uses block (offset + i / 4), word i % 4. For normals, words
// (0,1) and (2,3) of a block form Box-Muller pairs: elements 4b, 4b+1 take cos and sin of pair 0.
TR_HD double philox_uniform_at(uint64_t seed, uint64_t offset, uint64_t i) {
  Philox4 b = philox4x32_10(seed, offset + i / 4);
  uint32_t w = b.v[i % 4];
  uint32_t w2 = b.v[(i + 1) % 4];
  return philox_uniform_f64(w, w2);
}

TR_HD double philox_normal_at(uint64_t seed, uint64_t offset, uint64_t i) {
  Philox4 b = philox4x32_10(seed, offset + i / 4);
  unsigned pair = unsigned(i % 4) / 2;
  double u1 = (double(b.v[2 * pair]) + 1.0) * (1.0 / 4294967297.0);  // (0, 1]
  double u2 = double(b.v[2 * pair + 1]) * (1.0 / 4294967296.0);      // [0, 1)
  double r = ::sqrt(-2.0 * ::log(u1));
  double t = 6.283185307179586 * u2;
  return (i % 2 == 0) ? r * ::cos(t) : r * ::sin(t);
}

}  // namespace tr
