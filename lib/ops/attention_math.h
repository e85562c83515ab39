// Scaled dot-product attention over packed q, k, v, one row at a time, compiled for host and device:
// the CUDA kernels (ops/cuda/attention_kernels.cu) call these functions, and the CPU tests compare
// the blocked CPU kernel (ops/cpu/attention.cpp) with them. For one batch b and head h:
//   s_ij = scale q_i . k_j,  p_ij = exp(s_ij - lse_i),  lse_i = log S_j exp(s_ij),  y_i = S_j p_ij v_j
// with j <= i when causal (the masked scores are -inf, so p_ij = 0). The backward, with D_i = dy_i . y_i:
//   dp_ij = dy_i . v_j,  ds_ij = p_ij (dp_ij - D_i),
//   dq_i = scale S_j ds_ij k_j,  dk_j = scale S_i ds_ij q_i,  dv_j = S_i p_ij dy_i.
#pragma once
#include <cmath>
#include <cstdint>
#include "core/macros.h"

namespace tr::attn {

// qkv [B, T, 3C] (q, k, v side by side, each C = H heads of D), y and dy [B, T, C] (heads side by
// side), lse [B, H, T]; all contiguous.
struct Geometry {
  int64_t B = 0, T = 0, H = 0, D = 0;
  double scale = 1.0;
  bool causal = true;
  // qkv of shape [B, T, C3], C3 = 3 H D
  static Geometry of(int64_t B, int64_t T, int64_t C3, int64_t H, double scale, bool causal) {
    Geometry g;
    g.B = B;
    g.T = T;
    g.H = H;
    g.D = C3 / 3 / H;
    g.scale = scale;
    g.causal = causal;
    return g;
  }
  TR_HD int64_t C() const { return H * D; }
  // offsets (elements) of row i's head h: in qkv (part 0 = q, 1 = k, 2 = v), in y / dy, in lse
  TR_HD int64_t qkv_at(int64_t b, int64_t i, int64_t h, int part) const { return (b * T + i) * 3 * C() + part * C() + h * D; }
  TR_HD int64_t y_at(int64_t b, int64_t i, int64_t h) const { return (b * T + i) * C() + h * D; }
  TR_HD int64_t lse_at(int64_t b, int64_t h, int64_t i) const { return (b * H + h) * T + i; }
  // keys a query row i sees: [0, keys_end(i))
  TR_HD int64_t keys_end(int64_t i) const { return causal ? i + 1 : T; }
  // query rows that see key j: [queries_begin(j), T)
  TR_HD int64_t queries_begin(int64_t j) const { return causal ? j : 0; }
};

template <typename A, typename T>
TR_HD A dot(const T* x, const T* y, int64_t n) {
  A s = 0;
  for (int64_t d = 0; d < n; ++d) s += A(x[d]) * A(y[d]);
  return s;
}

// y_i and lse_i of query row i (batch b, head h).
template <typename T, typename A>
TR_HD void forward_row(const Geometry& g, const T* qkv, T* y, A* lse, int64_t b, int64_t h, int64_t i) {
  using std::exp;
  using std::log;
  const T* q = qkv + g.qkv_at(b, i, h, 0);
  const int64_t n = g.keys_end(i);
  const A scale = A(g.scale);
  A m = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    const A s = scale * dot<A>(q, qkv + g.qkv_at(b, j, h, 1), g.D);
    m = s > m ? s : m;
  }
  A l = 0;
  for (int64_t j = 0; j < n; ++j) l += exp(scale * dot<A>(q, qkv + g.qkv_at(b, j, h, 1), g.D) - m);
  const A L = m + log(l);
  T* yr = y + g.y_at(b, i, h);
  for (int64_t d = 0; d < g.D; ++d) yr[d] = T(0);
  for (int64_t j = 0; j < n; ++j) {
    const A p = exp(scale * dot<A>(q, qkv + g.qkv_at(b, j, h, 1), g.D) - L);
    const T* v = qkv + g.qkv_at(b, j, h, 2);
    for (int64_t d = 0; d < g.D; ++d) yr[d] = T(A(yr[d]) + p * A(v[d]));
  }
  lse[g.lse_at(b, h, i)] = L;
}

// dq_i of query row i, into dqkv's q part.
template <typename T, typename A>
TR_HD void backward_q_row(const Geometry& g, const T* dy, const T* qkv, const T* y, const A* lse, T* dqkv, int64_t b,
                          int64_t h, int64_t i) {
  using std::exp;
  const T *q = qkv + g.qkv_at(b, i, h, 0), *dyi = dy + g.y_at(b, i, h);
  const A Di = dot<A>(dyi, y + g.y_at(b, i, h), g.D), L = lse[g.lse_at(b, h, i)], scale = A(g.scale);
  T* dq = dqkv + g.qkv_at(b, i, h, 0);
  for (int64_t d = 0; d < g.D; ++d) dq[d] = T(0);
  for (int64_t j = 0; j < g.keys_end(i); ++j) {
    const T *k = qkv + g.qkv_at(b, j, h, 1), *v = qkv + g.qkv_at(b, j, h, 2);
    const A p = exp(scale * dot<A>(q, k, g.D) - L);
    const A ds = p * (dot<A>(dyi, v, g.D) - Di);
    for (int64_t d = 0; d < g.D; ++d) dq[d] = T(A(dq[d]) + scale * ds * A(k[d]));
  }
}

// dk_j and dv_j of key row j, into dqkv's k and v parts.
template <typename T, typename A>
TR_HD void backward_kv_row(const Geometry& g, const T* dy, const T* qkv, const T* y, const A* lse, T* dqkv, int64_t b,
                           int64_t h, int64_t j) {
  using std::exp;
  const T *k = qkv + g.qkv_at(b, j, h, 1), *v = qkv + g.qkv_at(b, j, h, 2);
  const A scale = A(g.scale);
  T *dk = dqkv + g.qkv_at(b, j, h, 1), *dv = dqkv + g.qkv_at(b, j, h, 2);
  for (int64_t d = 0; d < g.D; ++d) dk[d] = dv[d] = T(0);
  for (int64_t i = g.queries_begin(j); i < g.T; ++i) {
    const T *q = qkv + g.qkv_at(b, i, h, 0), *dyi = dy + g.y_at(b, i, h);
    const A p = exp(scale * dot<A>(q, k, g.D) - lse[g.lse_at(b, h, i)]);
    const A ds = p * (dot<A>(dyi, v, g.D) - dot<A>(dyi, y + g.y_at(b, i, h), g.D));
    for (int64_t d = 0; d < g.D; ++d) {
      dv[d] = T(A(dv[d]) + p * A(dyi[d]));
      dk[d] = T(A(dk[d]) + scale * ds * A(q[d]));
    }
  }
}

}  // namespace tr::attn
