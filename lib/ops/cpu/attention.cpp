// CPU kernels of attention_qkvpacked and its backward (ops/attention_math.h states the math and
// gives the row-at-a-time form). One (batch, head) per task on the pool; within a task, blocks of
// kRows query rows against the keys they see (a causal block stops at its last row's diagonal, so
// the masked half of the scores is never computed), the score and probability blocks kept in a
// per-thread [T, T] scratch that stays in L2, and every product in one register-blocked
// micro-kernel (block_product). The backward recomputes the probabilities from lse.
#include <immintrin.h>
#include <algorithm>
#include <cmath>
#include <vector>
#include "ops/attention_math.h"
#include "ops/cpu/cpu_isa.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/vec_math.h"
#include "ops/registry.h"

namespace tr::cpu {

namespace {

constexpr int64_t kRows = 4;   // rows of a micro-kernel block
constexpr int64_t kCols = 16;  // columns of a micro-kernel block (two 8-lane f32 vectors)

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// A kRows x kCols f32 block: c[r, j] = alpha S_{k0 <= k < k1} a[r rsa + k csa] b[k rsb + j].
void block_4x16_f32(int64_t k0, int64_t k1, const float* a, int64_t rsa, int64_t csa, const float* b, int64_t rsb,
                    float* c, int64_t rsc, float alpha) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  const float *a0 = a, *a1 = a + rsa, *a2 = a + 2 * rsa, *a3 = a + 3 * rsa;
  for (int64_t k = k0; k < k1; ++k) {
    __m256 b0 = _mm256_loadu_ps(b + k * rsb), b1 = _mm256_loadu_ps(b + k * rsb + 8);
    asm("" : "+x"(b0), "+x"(b1));  // in registers, as in block_4x32_f32
    const int64_t ak = k * csa;
    __m256 x = _mm256_broadcast_ss(a0 + ak);
    c00 = _mm256_fmadd_ps(x, b0, c00);
    c01 = _mm256_fmadd_ps(x, b1, c01);
    x = _mm256_broadcast_ss(a1 + ak);
    c10 = _mm256_fmadd_ps(x, b0, c10);
    c11 = _mm256_fmadd_ps(x, b1, c11);
    x = _mm256_broadcast_ss(a2 + ak);
    c20 = _mm256_fmadd_ps(x, b0, c20);
    c21 = _mm256_fmadd_ps(x, b1, c21);
    x = _mm256_broadcast_ss(a3 + ak);
    c30 = _mm256_fmadd_ps(x, b0, c30);
    c31 = _mm256_fmadd_ps(x, b1, c31);
  }
  const __m256 al = _mm256_set1_ps(alpha);
  _mm256_storeu_ps(c, _mm256_mul_ps(al, c00));
  _mm256_storeu_ps(c + 8, _mm256_mul_ps(al, c01));
  _mm256_storeu_ps(c + rsc, _mm256_mul_ps(al, c10));
  _mm256_storeu_ps(c + rsc + 8, _mm256_mul_ps(al, c11));
  _mm256_storeu_ps(c + 2 * rsc, _mm256_mul_ps(al, c20));
  _mm256_storeu_ps(c + 2 * rsc + 8, _mm256_mul_ps(al, c21));
  _mm256_storeu_ps(c + 3 * rsc, _mm256_mul_ps(al, c30));
  _mm256_storeu_ps(c + 3 * rsc + 8, _mm256_mul_ps(al, c31));
}

// The same for a kRows x 32 block in two 16-lane vectors a row, where the CPU has AVX-512.
__attribute__((target("avx512f"))) void block_4x32_f32(int64_t k0, int64_t k1, const float* a, int64_t rsa, int64_t csa,
                                                       const float* b, int64_t rsb, float* c, int64_t rsc,
                                                       float alpha) {
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  const float *a0 = a, *a1 = a + rsa, *a2 = a + 2 * rsa, *a3 = a + 3 * rsa;
  for (int64_t k = k0; k < k1; ++k) {
    __m512 b0 = _mm512_loadu_ps(b + k * rsb), b1 = _mm512_loadu_ps(b + k * rsb + 16);
    // in registers: folded into each FMA (GCC's choice), B would be loaded 4 times, and the loads,
    // not the FMAs, would set the pace
    asm("" : "+v"(b0), "+v"(b1));
    const int64_t ak = k * csa;
    __m512 x = _mm512_set1_ps(a0[ak]);
    c00 = _mm512_fmadd_ps(x, b0, c00);
    c01 = _mm512_fmadd_ps(x, b1, c01);
    x = _mm512_set1_ps(a1[ak]);
    c10 = _mm512_fmadd_ps(x, b0, c10);
    c11 = _mm512_fmadd_ps(x, b1, c11);
    x = _mm512_set1_ps(a2[ak]);
    c20 = _mm512_fmadd_ps(x, b0, c20);
    c21 = _mm512_fmadd_ps(x, b1, c21);
    x = _mm512_set1_ps(a3[ak]);
    c30 = _mm512_fmadd_ps(x, b0, c30);
    c31 = _mm512_fmadd_ps(x, b1, c31);
  }
  const __m512 al = _mm512_set1_ps(alpha);
  _mm512_storeu_ps(c, _mm512_mul_ps(al, c00));
  _mm512_storeu_ps(c + 16, _mm512_mul_ps(al, c01));
  _mm512_storeu_ps(c + rsc, _mm512_mul_ps(al, c10));
  _mm512_storeu_ps(c + rsc + 16, _mm512_mul_ps(al, c11));
  _mm512_storeu_ps(c + 2 * rsc, _mm512_mul_ps(al, c20));
  _mm512_storeu_ps(c + 2 * rsc + 16, _mm512_mul_ps(al, c21));
  _mm512_storeu_ps(c + 3 * rsc, _mm512_mul_ps(al, c30));
  _mm512_storeu_ps(c + 3 * rsc + 16, _mm512_mul_ps(al, c31));
}

// C[r, j] = alpha S_{k0 <= k < k1} A(r, k) B(k, j) for r < m <= kRows, j < n, with
// A(r, k) = a[r rsa + k csa], B(k, j) = b[k rsb + j], C(r, j) = c[r rsc + j].
template <typename T> void block_product(int64_t m, int64_t n, int64_t k0, int64_t k1, const T* a, int64_t rsa,
                                         int64_t csa, const T* b, int64_t rsb, T* c, int64_t rsc, T alpha) {
  for (int64_t j0 = 0; j0 < n;) {
    const int64_t w = std::min(kCols, n - j0);
    if constexpr (std::is_same_v<T, float>) {
      if (m == kRows && n - j0 >= 2 * kCols && use_avx512()) {
        block_4x32_f32(k0, k1, a, rsa, csa, b + j0, rsb, c + j0, rsc, alpha);
        j0 += 2 * kCols;
        continue;
      }
      if (m == kRows && w == kCols) {
        block_4x16_f32(k0, k1, a, rsa, csa, b + j0, rsb, c + j0, rsc, alpha);
        j0 += kCols;
        continue;
      }
    }
    T acc[kRows][kCols] = {};
    for (int64_t k = k0; k < k1; ++k) {
      const T* bk = b + k * rsb + j0;
      for (int64_t r = 0; r < m; ++r) {
        const T ar = a[r * rsa + k * csa];
        for (int64_t j = 0; j < w; ++j) acc[r][j] += ar * bk[j];
      }
    }
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < w; ++j) c[r * rsc + j0 + j] = alpha * acc[r][j];
    j0 += kCols;
  }
}

// e[j] = exp(x[j] - sub) for j < n (each x[j] - sub <= 0); returns S_j e[j] (8 lanes for f32).
template <typename T> T exp_shifted(T* x, int64_t n, T sub) {
  int64_t j = 0;
  T s = 0;
  if constexpr (std::is_same_v<T, float>) {
    const __m256 sv = _mm256_set1_ps(sub);
    __m256 acc = _mm256_setzero_ps();
    for (; j + 8 <= n; j += 8) {
      const __m256 e = exp8_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + j), sv));
      _mm256_storeu_ps(x + j, e);
      acc = _mm256_add_ps(acc, e);
    }
    if (j < n) {
      alignas(32) float t[8];
      for (int k = 0; k < 8; ++k) t[k] = j + k < n ? x[j + k] : -INFINITY;
      const __m256 e = exp8_nonpositive(_mm256_sub_ps(_mm256_load_ps(t), sv));
      _mm256_store_ps(t, e);
      acc = _mm256_add_ps(acc, e);
      for (int64_t k = j; k < n; ++k) x[k] = t[k - j];
    }
    return hsum8(acc);
  } else {
    for (; j < n; ++j) s += (x[j] = std::exp(x[j] - sub));
    return s;
  }
}

template <typename T> T row_max(const T* x, int64_t n) {
  T m = x[0];
#pragma omp simd reduction(max : m)
  for (int64_t j = 1; j < n; ++j) m = std::max(m, x[j]);
  return m;
}

// Scratch of one thread, reused across calls: [T, Tp] score / probability blocks and packed K^T, V^T.
template <typename T> struct Scratch { std::vector<T> p, ds, kt, vt, drow; };
template <typename T> Scratch<T>& scratch() {
  thread_local Scratch<T> s;
  return s;
}

// 8 x 8 f32 transpose: out[c ldo + r] = in[r ldi + c]
void transpose_8x8_f32(const float* in, int64_t ldi, float* out, int64_t ldo) {
  __m256 r0 = _mm256_loadu_ps(in), r1 = _mm256_loadu_ps(in + ldi), r2 = _mm256_loadu_ps(in + 2 * ldi),
         r3 = _mm256_loadu_ps(in + 3 * ldi), r4 = _mm256_loadu_ps(in + 4 * ldi), r5 = _mm256_loadu_ps(in + 5 * ldi),
         r6 = _mm256_loadu_ps(in + 6 * ldi), r7 = _mm256_loadu_ps(in + 7 * ldi);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
               t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
               t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
               u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
               u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
               u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(out, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(out + ldo, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(out + 2 * ldo, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(out + 3 * ldo, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(out + 4 * ldo, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(out + 5 * ldo, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(out + 6 * ldo, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(out + 7 * ldo, _mm256_permute2f128_ps(u3, u7, 0x31));
}

// kt[d Tp + j] = x_j[d] (row j of one head's k or v in qkv), zero for j in [T, Tp).
template <typename T>
void pack_transposed(const attn::Geometry& g, const T* qkv, int64_t b, int64_t h, int part, T* kt, int64_t Tp) {
  const T* x = qkv + g.qkv_at(b, 0, h, part);
  const int64_t ld = 3 * g.C();
  int64_t j0 = 0, d0 = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (; j0 + 8 <= g.T; j0 += 8)
      for (d0 = 0; d0 + 8 <= g.D; d0 += 8) transpose_8x8_f32(x + j0 * ld + d0, ld, kt + d0 * Tp + j0, Tp);
    // the rows of the full 8-row blocks past the last full 8 columns
    for (int64_t d = d0; d < g.D; ++d)
      for (int64_t j = 0; j < j0; ++j) kt[d * Tp + j] = x[j * ld + d];
  }
  for (int64_t d = 0; d < g.D; ++d) {
    for (int64_t j = j0; j < g.T; ++j) kt[d * Tp + j] = x[j * ld + d];
    std::fill(kt + d * Tp + g.T, kt + (d + 1) * Tp, T(0));
  }
}

// The columns a block of query rows [i0, i0 + m) computes: up to its last row's diagonal when causal.
int64_t block_cols(const attn::Geometry& g, int64_t i0, int64_t m, int64_t Tp) {
  return g.causal ? std::min(Tp, round_up(i0 + m, kCols)) : Tp;
}

// scores of rows [i0, i0 + m) into s[(i - i0) Tp + j], j < cols: scale q_i . k_j
template <typename T> void scores(const attn::Geometry& g, const T* qkv, const T* kt, int64_t b, int64_t h, int64_t i0,
                                  int64_t m, int64_t cols, int64_t Tp, T* s) {
  const int64_t ld = 3 * g.C();
  block_product<T>(m, cols, 0, g.D, qkv + g.qkv_at(b, i0, h, 0), ld, 1, kt, Tp, s, Tp, T(g.scale));
}

template <typename T> void attention_forward(const attn::Geometry& g, const T* qkv, T* y, T* lse) {
  const int64_t Tp = round_up(g.T, kCols), ld = 3 * g.C();
  parallel_for(g.B * g.H, 1, [&](int64_t t0, int64_t t1) {
    Scratch<T>& sc = scratch<T>();
    sc.p.resize(size_t(g.T * Tp));
    sc.kt.resize(size_t(g.D * Tp));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / g.H, h = t % g.H;
      pack_transposed(g, qkv, b, h, 1, sc.kt.data(), Tp);
      for (int64_t i0 = 0; i0 < g.T; i0 += kRows) {
        const int64_t m = std::min(kRows, g.T - i0), cols = block_cols(g, i0, m, Tp);
        T* s = sc.p.data() + i0 * Tp;
        scores(g, qkv, sc.kt.data(), b, h, i0, m, cols, Tp, s);
        for (int64_t r = 0; r < m; ++r) {
          T* row = s + r * Tp;
          const int64_t n = g.keys_end(i0 + r);
          const T mx = row_max(row, n);
          const T sum = exp_shifted(row, n, mx);
          lse[g.lse_at(b, h, i0 + r)] = mx + std::log(sum);
          const T inv = T(1) / sum;
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) row[j] *= inv;
          std::fill(row + n, row + cols, T(0));
        }
        // y rows = p v over the keys the block sees
        const int64_t keys = g.causal ? i0 + m : g.T;
        block_product<T>(m, g.D, 0, keys, s, Tp, 1, qkv + g.qkv_at(b, 0, h, 2), ld, y + g.y_at(b, i0, h), g.C(), T(1));
      }
    }
  });
}

template <typename T>
void attention_backward(const attn::Geometry& g, const T* dy, const T* qkv, const T* y, const T* lse, T* dqkv) {
  const int64_t Tp = round_up(g.T, kCols), ld = 3 * g.C(), C = g.C();
  parallel_for(g.B * g.H, 1, [&](int64_t t0, int64_t t1) {
    Scratch<T>& sc = scratch<T>();
    sc.p.resize(size_t(g.T * Tp));
    sc.ds.resize(size_t(g.T * Tp));
    sc.kt.resize(size_t(g.D * Tp));
    sc.vt.resize(size_t(g.D * Tp));
    sc.drow.resize(size_t(g.T));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / g.H, h = t % g.H;
      pack_transposed(g, qkv, b, h, 1, sc.kt.data(), Tp);
      pack_transposed(g, qkv, b, h, 2, sc.vt.data(), Tp);
      for (int64_t i = 0; i < g.T; ++i) {
        const T *dyi = dy + g.y_at(b, i, h), *yi = y + g.y_at(b, i, h);
        T Di = 0;
#pragma omp simd reduction(+ : Di)
        for (int64_t d = 0; d < g.D; ++d) Di += dyi[d] * yi[d];
        sc.drow[size_t(i)] = Di;
      }
      // per block of query rows: p, dp = dy v^T, ds = p (dp - D), dq = scale ds k
      for (int64_t i0 = 0; i0 < g.T; i0 += kRows) {
        const int64_t m = std::min(kRows, g.T - i0), cols = block_cols(g, i0, m, Tp);
        T *p = sc.p.data() + i0 * Tp, *ds = sc.ds.data() + i0 * Tp;
        scores(g, qkv, sc.kt.data(), b, h, i0, m, cols, Tp, p);
        block_product<T>(m, cols, 0, g.D, dy + g.y_at(b, i0, h), C, 1, sc.vt.data(), Tp, ds, Tp, T(1));
        for (int64_t r = 0; r < m; ++r) {
          T *pr = p + r * Tp, *dr = ds + r * Tp;
          const int64_t n = g.keys_end(i0 + r);
          exp_shifted(pr, n, lse[g.lse_at(b, h, i0 + r)]);
          const T Di = sc.drow[size_t(i0 + r)];
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) dr[j] = pr[j] * (dr[j] - Di);
          std::fill(pr + n, pr + cols, T(0));
          std::fill(dr + n, dr + cols, T(0));
        }
        const int64_t keys = g.causal ? i0 + m : g.T;
        block_product<T>(m, g.D, 0, keys, ds, Tp, 1, qkv + g.qkv_at(b, 0, h, 1), ld, dqkv + g.qkv_at(b, i0, h, 0), ld,
                         T(g.scale));
      }
      // per block of key rows: dk = scale ds^T q, dv = p^T dy over the query rows that see them
      for (int64_t j0 = 0; j0 < g.T; j0 += kRows) {
        const int64_t m = std::min(kRows, g.T - j0), first = g.queries_begin(j0);
        block_product<T>(m, g.D, first, g.T, sc.ds.data() + j0, 1, Tp, qkv + g.qkv_at(b, 0, h, 0), ld,
                         dqkv + g.qkv_at(b, j0, h, 1), ld, T(g.scale));
        block_product<T>(m, g.D, first, g.T, sc.p.data() + j0, 1, Tp, dy + g.y_at(b, 0, h), C,
                         dqkv + g.qkv_at(b, j0, h, 2), ld, T(1));
      }
    }
  });
}

attn::Geometry geometry(const Tensor& qkv, const Attrs& a) {
  return attn::Geometry::of(qkv.size(0), qkv.size(1), qkv.size(2), a.i("n_head"), a.f("scale"), a.b("causal"));
}

void attention_qkvpacked_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) {
  const Tensor qkv = in[0].contiguous();
  const attn::Geometry g = geometry(qkv, a);
  if (g.B * g.T * g.H == 0) return;
  if (qkv.dtype() == DType::F32)
    attention_forward<float>(g, qkv.data_ptr<float>(), out[0].data_ptr<float>(), out[1].data_ptr<float>());
  else
    attention_forward<double>(g, qkv.data_ptr<double>(), out[0].data_ptr<double>(), out[1].data_ptr<double>());
}
TR_REGISTER_KERNEL(attention_qkvpacked, CPU, attention_qkvpacked_cpu);

void attention_qkvpacked_backward_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) {
  const Tensor dy = in[0].contiguous(), qkv = in[1].contiguous(), y = in[2].contiguous(), lse = in[3].contiguous();
  const attn::Geometry g = geometry(qkv, a);
  if (g.B * g.T * g.H == 0) return;
  if (qkv.dtype() == DType::F32)
    attention_backward<float>(g, dy.data_ptr<float>(), qkv.data_ptr<float>(), y.data_ptr<float>(),
                              lse.data_ptr<float>(), out[0].data_ptr<float>());
  else
    attention_backward<double>(g, dy.data_ptr<double>(), qkv.data_ptr<double>(), y.data_ptr<double>(),
                               lse.data_ptr<double>(), out[0].data_ptr<double>());
}
TR_REGISTER_KERNEL(attention_qkvpacked_backward, CPU, attention_qkvpacked_backward_cpu);

}  // namespace
}  // namespace tr::cpu
