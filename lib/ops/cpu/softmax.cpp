// CPU softmax / log_softmax: rows along `dim`, max-subtracted, accumulated in f32/f64.
#include <cmath>
#include "ops/cpu/loops.h"
#include "ops/registry.h"

namespace tr::cpu {

namespace {

template <bool Log>
void softmax_kernel(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) {
  int64_t dim = a.i("dim");
  const Tensor& x = in[0];
  int64_t nd = x.dim();
  // Move `dim` last, compute on contiguous rows, write back through the same permutation.
  Shape perm;
  for (int64_t i = 0; i < nd; ++i) if (i != dim) perm.push_back(i);
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

void softmax_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) { softmax_kernel<false>(in, out, a); }
void log_softmax_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) { softmax_kernel<true>(in, out, a); }
TR_REGISTER_KERNEL(softmax, CPU, softmax_cpu);
TR_REGISTER_KERNEL(log_softmax, CPU, log_softmax_cpu);

}  // namespace
}  // namespace tr::cpu
