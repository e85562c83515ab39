// CPU kernels of cross_entropy_rows and cross_entropy_rows_backward (ops/cross_entropy.cpp), parallel
// over rows. f64 rows take the scalar loop of ops/cross_entropy_math.h (the spec); f32, bf16 and f16
// rows go through it a chunk at a time: each chunk of a row is read once from memory (widened to
// f32 in an L1 buffer for bf16 / f16), its max, sum and sum of exponentials taken in 8 lanes from
// there, and the chunk's state merged into the row's (ce::merge). The backward writes
// a exp(x - lse) - b ls/V in 8 lanes and the target's element with the scalar formula.
#include <immintrin.h>
#include <cmath>
#include "ops/cpu/loops.h"
#include "ops/cpu/vec_math.h"
#include "ops/cross_entropy_math.h"
#include "ops/registry.h"

namespace tr::cpu {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

constexpr int64_t kChunk = 1024;  // f32 elements of a row's chunk (4 KiB: stays in L1 between passes)

template <typename A, typename T> ce::Stats<A> scalar_stats(const T* x, int64_t n, int64_t base) {
  ce::Stats<A> st = ce::empty_stats<A>();
  for (int64_t k = 0; k < n; ++k) ce::push(st, A(x[k]), base + k);
  return st;
}

// The state of n f32 values at row positions base.. (8 lanes; a chunk holding a NaN or whose max
// is infinite takes the scalar loop, where -inf - -inf and NaNs have their defined outcomes).
ce::Stats<float> chunk_stats(const float* x, int64_t n, int64_t base) {
  const int64_t full = n / 8 * 8;
  __m256 vm = _mm256_set1_ps(-INFINITY), vs = _mm256_setzero_ps(), vnan = _mm256_setzero_ps();
  for (int64_t k = 0; k < full; k += 8) {
    const __m256 v = _mm256_loadu_ps(x + k);
    vm = _mm256_max_ps(vm, v);
    vs = _mm256_add_ps(vs, v);
    vnan = _mm256_or_ps(vnan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  float m = hmax8(vm), sum = hsum8(vs);
  bool nan = _mm256_movemask_ps(vnan) != 0;
  for (int64_t k = full; k < n; ++k) {
    m = std::max(m, x[k]);
    sum += x[k];
    nan = nan || x[k] != x[k];
  }
  if (nan || !std::isfinite(m)) return scalar_stats<float>(x, n, base);
  int64_t arg = 0;
  while (x[arg] != m) ++arg;
  const __m256 mv = _mm256_set1_ps(m);
  __m256 ve = _mm256_setzero_ps();
  for (int64_t k = 0; k < full; k += 8)
    ve = _mm256_add_ps(ve, exp8_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + k), mv)));
  if (full < n) {  // the tail as one block padded with -inf (exp gives 0)
    alignas(32) float t[8];
    for (int64_t k = 0; k < 8; ++k) t[k] = full + k < n ? x[full + k] : -INFINITY;
    ve = _mm256_add_ps(ve, exp8_nonpositive(_mm256_sub_ps(_mm256_load_ps(t), mv)));
  }
  return {m, hsum8(ve), sum, base + arg};
}

// n elements of T as f32: the row itself for f32, else widened into buf.
template <typename T> const float* as_f32(const T* x, int64_t n, float* buf) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    int64_t k = 0;
    if constexpr (std::is_same_v<T, BFloat16>)
      for (; k + 8 <= n; k += 8) _mm256_store_ps(buf + k, load8(reinterpret_cast<const uint16_t*>(x + k)));
    for (; k < n; ++k) buf[k] = float(x[k]);
    return buf;
  }
}

template <typename T> ce::Stats<acc_t<T>> row_stats(const T* x, int64_t V) {
  if constexpr (std::is_same_v<T, double>) {
    return scalar_stats<double>(x, V, 0);
  } else {
    alignas(32) float buf[kChunk];
    ce::Stats<float> st = ce::empty_stats<float>();
    for (int64_t c = 0; c < V; c += kChunk) {
      const int64_t n = std::min(kChunk, V - c);
      st = ce::merge(st, chunk_stats(as_f32(x + c, n, buf), n, c));
    }
    return st;
  }
}

template <typename T> void forward_kernel(const T* x, const int64_t* t, int64_t N, int64_t V, int64_t ignore_index,
                                          double ls, acc_t<T>* loss, acc_t<T>* lse, bool* correct) {
  using A = acc_t<T>;
  parallel_for(N, std::max<int64_t>(1, kGrain / std::max<int64_t>(V, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * V;
      const ce::Stats<A> st = row_stats(xr, V);
      const int64_t tr = t[r];
      const A l = ce::lse_of(st);
      // an out-of-range target (raised by the caller's check) reads nothing
      const A xt = tr >= 0 && tr < V ? A(xr[tr]) : A(NAN);
      lse[r] = l;
      loss[r] = tr == ignore_index ? A(0) : ce::row_loss(l, xt, st.sum_x, A(ls), V);
      correct[r] = st.arg == tr;
    }
  });
}

template <typename T> void backward_kernel(const acc_t<T>* gl, const acc_t<T>* gz, const T* x, const int64_t* t,
                                           const acc_t<T>* lse, int64_t N, int64_t V, int64_t ignore_index, double ls,
                                           T* dx) {
  using A = acc_t<T>;
  constexpr bool kVec = std::is_same_v<T, float> || std::is_same_v<T, BFloat16>;
  using Bits = std::conditional_t<std::is_same_v<T, float>, float, uint16_t>;  // what load8 / store8 take
  parallel_for(N, std::max<int64_t>(1, kGrain / std::max<int64_t>(V, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * V;
      T* o = dx + r * V;
      const int64_t tr = t[r];
      const A b = tr == ignore_index ? A(0) : gl[r], a = b + gz[r], L = lse[r], lsa = A(ls);
      int64_t k = 0;
      if constexpr (kVec) {
        const __m256 va = _mm256_set1_ps(a), vL = _mm256_set1_ps(L), vbq = _mm256_set1_ps(b * (lsa / A(V)));
        for (; k + 8 <= V; k += 8) {
          const __m256 p = exp8_nonpositive(_mm256_sub_ps(load8(reinterpret_cast<const Bits*>(xr + k)), vL));
          store8(reinterpret_cast<Bits*>(o + k), _mm256_sub_ps(_mm256_mul_ps(va, p), vbq));
        }
      }
      for (; k < V; ++k) o[k] = T(ce::grad(A(xr[k]), L, a, b, lsa, V, k == tr));
      if (tr >= 0 && tr < V) o[tr] = T(ce::grad(A(xr[tr]), L, a, b, lsa, V, true));
    }
  });
}

void cross_entropy_rows_cpu(const Ins& in, Outs& out, const Attrs& a) {
  const Tensor x = in[0].contiguous(), t = in[1].contiguous();
  const int64_t N = x.size(0), V = x.size(1);
  TR_DISPATCH_FLOAT(x.dtype(), "cross_entropy_rows", [&] {
    using A = acc_t<scalar_t>;
    forward_kernel<scalar_t>(x.data_ptr<scalar_t>(), t.data_ptr<int64_t>(), N, V, a.i("ignore_index"),
                             a.f("label_smoothing"), out[0].data_ptr<A>(), out[1].data_ptr<A>(),
                             out[2].data_ptr<bool>());
  });
}
TR_REGISTER_KERNEL(cross_entropy_rows, CPU, cross_entropy_rows_cpu);

void cross_entropy_rows_backward_cpu(const Ins& in, Outs& out, const Attrs& a) {
  const Tensor gl = in[0].contiguous(), gz = in[1].contiguous(), x = in[2].contiguous(), t = in[3].contiguous(),
               lse = in[4].contiguous();
  const int64_t N = x.size(0), V = x.size(1);
  TR_DISPATCH_FLOAT(x.dtype(), "cross_entropy_rows_backward", [&] {
    using A = acc_t<scalar_t>;
    backward_kernel<scalar_t>(gl.data_ptr<A>(), gz.data_ptr<A>(), x.data_ptr<scalar_t>(), t.data_ptr<int64_t>(),
                              lse.data_ptr<A>(), N, V, a.i("ignore_index"), a.f("label_smoothing"),
                              out[0].data_ptr<scalar_t>());
  });
}
TR_REGISTER_KERNEL(cross_entropy_rows_backward, CPU, cross_entropy_rows_backward_cpu);

}  // namespace

}  // namespace tr::cpu
