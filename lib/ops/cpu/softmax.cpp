// CPU softmax / log_softmax: rows along `dim`, max-subtracted, accumulated in f32/f64.
#include <cmath>
#include <cstring>
#include "ops/cpu/loops.h"
#include "ops/cpu/vec_math.h"
#include "ops/registry.h"

namespace tr::cpu {

namespace {

// One f32 row of n: m = max x, e_k = exp(x_k - m) (libmvec, 8 lanes), s = sum e_k in 8 lanes;
// softmax y_k = e_k / s, log_softmax y_k = x_k - m - log s. The tail is one padded block
// (-inf pads add exp(-inf) = 0 to the sum).
template <bool Log> void softmax_row_f32(const float* x, float* y, int64_t n) {
  const int64_t full = n / 8 * 8;
  alignas(32) float tail[8];
  for (int k = 0; k < 8; ++k) tail[k] = full + k < n ? x[full + k] : -INFINITY;
  __m256 vm = _mm256_load_ps(tail);
  for (int64_t k = 0; k < full; k += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + k));
  const float m = hmax8(vm);
  const __m256 mv = _mm256_set1_ps(m);
  __m256 vs = _mm256_setzero_ps();
  for (int64_t k = 0; k < full; k += 8) {
    __m256 e = exp8_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + k), mv));
    if (!Log) _mm256_storeu_ps(y + k, e);
    vs = _mm256_add_ps(vs, e);
  }
  alignas(32) float te[8];
  _mm256_store_ps(te, exp8_nonpositive(_mm256_sub_ps(_mm256_load_ps(tail), mv)));
  vs = _mm256_add_ps(vs, _mm256_load_ps(te));
  const float s = hsum8(vs);
  if (Log) {
    const float sub = m + std::log(s);
    for (int64_t k = 0; k < n; ++k) y[k] = x[k] - sub;
  } else {
    for (int64_t k = full; k < n; ++k) y[k] = te[k - full];
    const float inv = 1.0f / s;
    for (int64_t k = 0; k < n; ++k) y[k] *= inv;
  }
}

template <bool Log> void softmax_kernel(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) {
  int64_t dim = a.i("dim");
  const Tensor& x = in[0];
  int64_t nd = x.dim();
  // Move `dim` last, compute on contiguous rows, write back through the same permutation.
  Shape perm;
  for (int64_t i = 0; i < nd; ++i)
    if (i != dim) perm.push_back(i);
  if (nd) perm.push_back(dim);
  Tensor xr = nd ? x.detach().permute(perm).contiguous() : x.detach().contiguous().reshape({1});
  // Along the last dim the rows are written straight into the output.
  const bool direct = nd > 0 && dim == nd - 1;
  Tensor yr = direct ? out[0] : empty_like(xr);
  int64_t len = nd ? x.size(dim) : 1;
  int64_t rows = len ? xr.numel() / len : 0;
  TR_DISPATCH_FLOAT(x.dtype(), Log ? "log_softmax" : "softmax", [&] {
    using A = acc_t<scalar_t>;
    const scalar_t* px = xr.data_ptr<scalar_t>();
    scalar_t* py = yr.data_ptr<scalar_t>();
    parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(len, 1)), [&](int64_t b, int64_t e) {
      if constexpr (std::is_same_v<scalar_t, float>) {
        for (int64_t r = b; r < e; ++r) softmax_row_f32<Log>(px + r * len, py + r * len, len);
        return;
      }
      for (int64_t r = b; r < e; ++r) {
        const scalar_t* row = px + r * len;
        scalar_t* o = py + r * len;
        A m = -INFINITY;
        for (int64_t k = 0; k < len; ++k) m = std::max(m, A(row[k]));
        A s = 0;
        for (int64_t k = 0; k < len; ++k) s += std::exp(A(row[k]) - m);
        if (Log) {
          A ls = std::log(s);
          for (int64_t k = 0; k < len; ++k) o[k] = scalar_t(A(row[k]) - m - ls);
        } else {
          A inv = A(1) / s;
          for (int64_t k = 0; k < len; ++k) o[k] = scalar_t(std::exp(A(row[k]) - m) * inv);
        }
      }
    });
  });
  if (nd == 0) {
    out[0].copy_(yr.reshape({}));
    return;
  }
  if (direct) return;
  out[0].permute(perm).copy_(yr);
}

void softmax_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) {
  softmax_kernel<false>(in, out, a);
}
void log_softmax_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) {
  softmax_kernel<true>(in, out, a);
}
TR_REGISTER_KERNEL(softmax, CPU, softmax_cpu);
TR_REGISTER_KERNEL(log_softmax, CPU, log_softmax_cpu);

// One f32 row: s = sum g_k y_k (8 lanes), o_k = y_k (g_k - s); with Log: s = sum g_k, o_k = g_k - exp(y_k) s.
// Products and sums are rounded separately (no FMA), as torch's vectorised kernel and the composite
// ops round them: a fused multiply-add differs in the last bit, which a CNN's training amplifies.
template <bool Log> void softmax_backward_row_f32(const float* g, const float* y, float* o, int64_t n) {
  const int64_t full = n / 8 * 8;
  __m256 vs = _mm256_setzero_ps();
  for (int64_t k = 0; k < full; k += 8) {
    const __m256 gv = _mm256_loadu_ps(g + k);
    vs = _mm256_add_ps(vs, Log ? gv : _mm256_mul_ps(gv, _mm256_loadu_ps(y + k)));
  }
  float s = hsum8(vs);
  for (int64_t k = full; k < n; ++k) s += Log ? g[k] : g[k] * y[k];
  const __m256 sv = _mm256_set1_ps(s);
  int64_t k = 0;
  for (; k < full; k += 8) {
    const __m256 gv = _mm256_loadu_ps(g + k), yv = _mm256_loadu_ps(y + k);
    _mm256_storeu_ps(o + k,
                     Log ? _mm256_sub_ps(gv, _mm256_mul_ps(exp8(yv), sv)) : _mm256_mul_ps(yv, _mm256_sub_ps(gv, sv)));
  }
  if (k == n) return;
  // the tail as one padded block: exp of the same 8-lane function as the rest (and as the exp op)
  alignas(32) float gt[8] = {0}, yt[8] = {0}, ot[8];
  std::memcpy(gt, g + k, size_t(n - k) * 4);
  std::memcpy(yt, y + k, size_t(n - k) * 4);
  const __m256 gv = _mm256_load_ps(gt), yv = _mm256_load_ps(yt);
  _mm256_store_ps(ot, Log ? _mm256_sub_ps(gv, _mm256_mul_ps(exp8(yv), sv)) : _mm256_mul_ps(yv, _mm256_sub_ps(gv, sv)));
  std::memcpy(o + k, ot, size_t(n - k) * 4);
}

// softmax_backward (inputs g, y; attrs dim, log): rows along `dim` moved last and made contiguous.
void softmax_backward_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) {
  const int64_t dim = a.i("dim");
  const bool log = a.b("log");
  const Tensor &g = in[0], &y = in[1];
  const int64_t nd = y.dim();
  Shape perm;
  for (int64_t i = 0; i < nd; ++i)
    if (i != dim) perm.push_back(i);
  if (nd) perm.push_back(dim);
  auto rows_of = [&](const Tensor& t) {
    return nd ? t.detach().permute(perm).contiguous() : t.detach().contiguous().reshape({1});
  };
  Tensor gr = rows_of(g), yr = rows_of(y);
  const bool direct = nd > 0 && dim == nd - 1;
  Tensor orr = direct ? out[0] : empty_like(yr);
  const int64_t len = nd ? y.size(dim) : 1;
  const int64_t rows = len ? yr.numel() / len : 0;
  TR_DISPATCH_FLOAT(y.dtype(), "softmax_backward", [&] {
    using A = acc_t<scalar_t>;
    const scalar_t *pg = gr.data_ptr<scalar_t>(), *py = yr.data_ptr<scalar_t>();
    scalar_t* po = orr.data_ptr<scalar_t>();
    parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(len, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const scalar_t *gk = pg + r * len, *yk = py + r * len;
        scalar_t* ok = po + r * len;
        if constexpr (std::is_same_v<scalar_t, float>) {
          // (a plain if: this function is no template, so the other dtypes' branch is compiled too)
          const float *gf = reinterpret_cast<const float*>(gk), *yf = reinterpret_cast<const float*>(yk);
          float* of = reinterpret_cast<float*>(ok);
          if (log)
            softmax_backward_row_f32<true>(gf, yf, of, len);
          else
            softmax_backward_row_f32<false>(gf, yf, of, len);
          continue;
        }
        A s = 0;
        for (int64_t k = 0; k < len; ++k) s += log ? A(gk[k]) : A(gk[k]) * A(yk[k]);
        for (int64_t k = 0; k < len; ++k)
          ok[k] = scalar_t(log ? A(gk[k]) - std::exp(A(yk[k])) * s : A(yk[k]) * (A(gk[k]) - s));
      }
    });
  });
  if (nd == 0) {
    out[0].copy_(orr.reshape({}));
    return;
  }
  if (!direct) out[0].permute(perm).copy_(orr);
}
TR_REGISTER_KERNEL(softmax_backward, CPU, softmax_backward_cpu);

}  // namespace
}  // namespace tr::cpu
