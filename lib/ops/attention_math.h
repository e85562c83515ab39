// Scaled dot-product attention over packed q, k, v, one row at a time, compiled for host and device:
// the row formulas below are the spec the CPU tests hold the blocked CPU kernel
// (ops/cpu/attention.cpp) to, and the CUDA kernels (ops/cuda/attention_kernels.cu, FlashAttention-2)
// call the tile rules and the online softmax at the end, which the CPU tests run too. For one batch b
// and head h:
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
  TR_HD int64_t qkv_at(int64_t b, int64_t i, int64_t h, int part) const {
    return (b * T + i) * 3 * C() + part * C() + h * D;
  }
  TR_HD int64_t y_at(int64_t b, int64_t i, int64_t h) const { return (b * T + i) * C() + h * D; }
  TR_HD int64_t lse_at(int64_t b, int64_t h, int64_t i) const { return (b * H + h) * T + i; }
  // keys a query row i sees: [0, keys_end(i))
  TR_HD int64_t keys_end(int64_t i) const { return causal ? i + 1 : T; }
  // query rows that see key j: [queries_begin(j), T)
  TR_HD int64_t queries_begin(int64_t j) const { return causal ? j : 0; }
  // the masking rule of a tile: whether query row i sees key j (rows and keys of a tile past T,
  // its padding, see nothing and are seen by nothing; causal, a key past the diagonal is masked)
  TR_HD bool visible(int64_t i, int64_t j) const { return i < T && j < T && (!causal || j <= i); }
  // keys a tile of query rows [i0, i0 + n) sees: [0, tile_keys_end(i0, n))
  TR_HD int64_t tile_keys_end(int64_t i0, int64_t n) const {
    const int64_t e = keys_end(i0 + n - 1);
    return e < T ? e : T;
  }
};

// The CUDA kernels' largest head dim (their shared-memory tiles are sized for it); larger heads
// run the composite chain on CUDA.
constexpr int64_t kMaxFlashHeadDim = 128;

template <typename A, typename T> TR_HD A dot(const T* x, const T* y, int64_t n) {
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
template <typename T, typename A> TR_HD void backward_q_row(const Geometry& g, const T* dy, const T* qkv, const T* y,
                                                            const A* lse, T* dqkv, int64_t b, int64_t h, int64_t i) {
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
template <typename T, typename A> TR_HD void backward_kv_row(const Geometry& g, const T* dy, const T* qkv, const T* y,
                                                             const A* lse, T* dqkv, int64_t b, int64_t h, int64_t j) {
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

namespace tr::attn {

// ---- FlashAttention-2 (Dao, 2023): the scores of a query row arrive one tile of keys at a time ----
// The softmax runs online (Milakov and Gimelshein, 2018): with m the running max of the scores met
// and l the running S exp(s - m), a tile whose scores have max mt moves m to m' = max(m, mt), rescales
// l and the row's output accumulator o by exp(m - m'), then adds S_tile exp(s_j - m') to l and
// S_tile exp(s_j - m') v_j to o. After the last tile y = o / l and lse = m + log l. A tile whose
// scores are all masked (-inf) leaves a row that has met none with m = -inf: its exponentials are
// taken against 0 instead, so that they are exp(-inf) = 0 and never exp(-inf + inf) = NaN.
template <typename A> struct OnlineSoftmax {
  A m = A(-INFINITY);  // max of the scores met
  A l = A(0);          // S exp(s - m) over the scores met

  // the shift the exponentials of the current tile are taken against
  TR_HD A base() const { return m == A(-INFINITY) ? A(0) : m; }
  // Enters a tile whose scores have max tile_max: returns exp(m - m'), the factor o is rescaled by
  // (l is rescaled here).
  TR_HD A enter(A tile_max) {
    using std::exp;
    const A old = m;
    m = tile_max > m ? tile_max : m;
    const A alpha = exp(old - base());
    l *= alpha;
    return alpha;
  }
  // exp(s - m') of a score of the entered tile: 0 for a masked score (-inf)
  TR_HD A p(A s) const {
    using std::exp;
    return exp(s - base());
  }
  // the entered tile's S exp(s - m')
  TR_HD void add(A tile_sum) { l += tile_sum; }
  TR_HD A lse() const {
    using std::log;
    return m + log(l);
  }
};

// The backward's probability of a score s of row i against key j, recomputed from the row's lse
// (0 where the mask hides the key), and ds = p (dp - D_i) with D_i = dy_i . y_i.
template <typename A> TR_HD A probability(const Geometry& g, int64_t i, int64_t j, A s, A lse) {
  using std::exp;
  return g.visible(i, j) ? exp(s - lse) : A(0);
}
template <typename A> TR_HD A score_grad(A p, A dp, A delta) { return p * (dp - delta); }

// forward_row as the CUDA forward computes it: keys in tiles of `tile` with the online softmax, the
// output accumulated in A (the CPU tests check it against forward_row).
template <typename T, typename A> TR_HD void forward_row_tiled(const Geometry& g, const T* qkv, T* y, A* lse, int64_t b,
                                                               int64_t h, int64_t i, int64_t tile,
                                                               A* o /* g.D scratch */) {
  const T* q = qkv + g.qkv_at(b, i, h, 0);
  const A scale = A(g.scale);
  OnlineSoftmax<A> st;
  for (int64_t d = 0; d < g.D; ++d) o[d] = A(0);
  for (int64_t j0 = 0; j0 < g.tile_keys_end(i, 1); j0 += tile) {
    A mt = A(-INFINITY);
    for (int64_t j = j0; j < j0 + tile; ++j)
      if (g.visible(i, j)) {
        const A s = scale * dot<A>(q, qkv + g.qkv_at(b, j, h, 1), g.D);
        mt = s > mt ? s : mt;
      }
    const A alpha = st.enter(mt);
    A sum = A(0);
    for (int64_t d = 0; d < g.D; ++d) o[d] *= alpha;
    for (int64_t j = j0; j < j0 + tile; ++j) {
      if (!g.visible(i, j)) continue;  // p = 0
      const A p = st.p(scale * dot<A>(q, qkv + g.qkv_at(b, j, h, 1), g.D));
      sum += p;
      for (int64_t d = 0; d < g.D; ++d) o[d] += p * A(qkv[g.qkv_at(b, j, h, 2) + d]);
    }
    st.add(sum);
  }
  for (int64_t d = 0; d < g.D; ++d) y[g.y_at(b, i, h) + d] = T(o[d] / st.l);
  lse[g.lse_at(b, h, i)] = st.lse();
}

}  // namespace tr::attn
