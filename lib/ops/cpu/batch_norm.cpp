// CPU batch-norm kernels (batch_norm, batch_norm_backward, batch_norm_elemt) over x viewed as
// [N, C, L], L = the product of the dims after 1. Per-channel sums run in double (mean, then the
// squared deviations: two passes, as torch's CPU kernel), and the output is y = x alpha + beta with
// alpha = invstd w and beta = b - mean alpha per channel.
// Each thread owns a block of channels [c0, c1) and sweeps it sample by sample: the rows x[n, c0:c1]
// are contiguous, so a sweep streams through memory (one channel at a time would jump a whole
// sample between rows of a few KiB, and every row would start with cold prefetchers: 2x slower).
// Each channel is summed by one thread in a fixed order: results do not depend on the thread count.
// The row loops are ops/cpu/batch_norm_rows.h.
// The composite in lib/ops/batch_norm.cpp (mean/var/rsqrt/mul/add) is the specification that
// tests/unit/test_batch_norm_op.cpp checks these kernels against.
#include <vector>
#include "ops/batch_norm_math.h"
#include "ops/cpu/batch_norm_rows.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::cpu {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

using namespace bn_rows;

// y[:, c] = x[:, c] alpha[c] + beta[c] for the channels of [c0, c1)
template <typename T> void affine_block(const T* x, T* y, const NCL& g, int64_t c0, int64_t c1,
                                        const std::vector<double>& alpha, const std::vector<double>& beta) {
  using A = acc_t<T>;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t c = c0; c < c1; ++c)
      row_affine(x + g.row(n, c), y + g.row(n, c), g.L, A(alpha[size_t(c - c0)]), A(beta[size_t(c - c0)]));
}

// mean = S(x) / M, var = S((x - mean)^2) / M (biased), y = x alpha + beta
template <typename T>
void batch_norm_kernel(const T* x, const T* w, const T* b, T* y, T* mean_out, T* var_out, const NCL& g, double eps) {
  for_channel_blocks(g, [&](int64_t c0, int64_t c1) {
    std::vector<double> alpha, beta;
    channel_statistics(x, w, b, mean_out, var_out, g, c0, c1, eps, alpha, beta);
    affine_block(x, y, g, c0, c1, alpha, beta);
  });
}

// gb = S(gy), gw = S(gy xmu) invstd, gx = (gy - S(gy)/M - xmu invstd^2 S(gy xmu)/M) invstd w
template <typename T> void batch_norm_backward_kernel(const T* gy, const T* x, const T* w, const T* mean, const T* var,
                                                      T* gx, T* gw, T* gb, const NCL& g, double eps) {
  for_channel_blocks(g, [&](int64_t c0, int64_t c1) {
    const size_t nc = size_t(c1 - c0);
    std::vector<double> s_g(nc, 0.0), s_gxmu(nc, 0.0);
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t c = c0; c < c1; ++c)
        row_grad_sums(gy + g.row(n, c), x + g.row(n, c), g.L, at(mean, c), s_g[size_t(c - c0)], s_gxmu[size_t(c - c0)]);
    const GradRowCoefficients<T> q = grad_row_coefficients(s_g, s_gxmu, w, mean, var, gw, gb, g, c0, c1, eps);
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t c = c0; c < c1; ++c) {
        const size_t i = size_t(c - c0);
        row_grad_input(gy + g.row(n, c), x + g.row(n, c), gx + g.row(n, c), g.L, q.k[i], q.grad_mean[i], q.mean[i],
                       q.scale[i]);
      }
  });
}

void batch_norm_cpu(const Ins& in, Outs& out, const Attrs& a) {
  Tensor x = in[0].contiguous(), w = in[1].contiguous(), b = in[2].contiguous();
  TR_DISPATCH_FLOAT(x.dtype(), "batch_norm", [&] {
    batch_norm_kernel(x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(),
                      out[0].data_ptr<scalar_t>(), out[1].data_ptr<scalar_t>(), out[2].data_ptr<scalar_t>(),
                      ncl_of(x.sizes()), a.f("eps"));
  });
}
TR_REGISTER_KERNEL(batch_norm, CPU, batch_norm_cpu);

void batch_norm_backward_cpu(const Ins& in, Outs& out, const Attrs& a) {
  Tensor gy = in[0].contiguous(), x = in[1].contiguous(), w = in[2].contiguous(), m = in[3].contiguous(),
         v = in[4].contiguous();
  TR_DISPATCH_FLOAT(x.dtype(), "batch_norm_backward", [&] {
    batch_norm_backward_kernel(gy.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
                               m.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(), out[0].data_ptr<scalar_t>(),
                               out[1].data_ptr<scalar_t>(), out[2].data_ptr<scalar_t>(), ncl_of(x.sizes()), a.f("eps"));
  });
}
TR_REGISTER_KERNEL(batch_norm_backward, CPU, batch_norm_backward_cpu);

// y = x alpha + beta, alpha = w / sqrt(var + eps), beta = b - mean alpha
void batch_norm_elemt_cpu(const Ins& in, Outs& out, const Attrs& a) {
  Tensor x = in[0].contiguous(), w = in[1].contiguous(), b = in[2].contiguous(), m = in[3].contiguous(),
         v = in[4].contiguous();
  const double eps = a.f("eps");
  const NCL g = ncl_of(x.sizes());
  TR_DISPATCH_FLOAT(x.dtype(), "batch_norm_elemt", [&] {
    using T = scalar_t;
    const T *px = x.data_ptr<T>(), *pw = w.data_ptr<T>(), *pb = b.data_ptr<T>(), *pm = m.data_ptr<T>(),
            *pv = v.data_ptr<T>();
    T* py = out[0].data_ptr<T>();
    for_channel_blocks(g, [&](int64_t c0, int64_t c1) {
      std::vector<double> alpha, beta;
      for (int64_t c = c0; c < c1; ++c) {
        double al, be;
        bn::affine_coefficients(at(pw, c), at(pb, c), at(pm, c), at(pv, c), eps, &al, &be);
        alpha.push_back(al);
        beta.push_back(be);
      }
      affine_block(px, py, g, c0, c1, alpha, beta);
    });
  });
}
TR_REGISTER_KERNEL(batch_norm_elemt, CPU, batch_norm_elemt_cpu);

}  // namespace
}  // namespace tr::cpu
