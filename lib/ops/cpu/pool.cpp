// CPU pooling kernels: max_pool2d (values + flat argmax) and max_pool2d_backward, avg_pool2d and
// its adjoint avg_pool2d_backward; plain window loops (2x2 max windows without padding have their
// own loop), parallel over the N*C planes.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include "ops/cpu/loops.h"
#include "ops/cpu/max_pool_plane.h"
#include "ops/ops.h"
#include "ops/pool_geom.h"
#include "ops/pool_math.h"
#include "ops/registry.h"

namespace tr::cpu {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

using pool::Geom;

// f(plane) for each plane, split across the pool in chunks of about kGrain window taps.
template <typename F> void for_planes(const Geom& g, const F& f) {
  int64_t per = std::max<int64_t>(1, g.OH * g.OW * g.KH * g.KW);
  parallel_for(g.planes, std::max<int64_t>(1, kGrain / per), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) f(p);
  });
}

// y[oh, ow] = max over the window's taps inside the plane, idx = ih W + iw of the first maximum
// (pool::max_window).
void max_pool2d_cpu(const Ins& in, Outs& out, const Attrs& a) {
  Tensor x = in[0].contiguous();
  Geom g = pool_geom(x.sizes(), out[0].sizes(), a);
  int64_t* pi = out[1].data_ptr<int64_t>();
  TR_DISPATCH_FLOAT(x.dtype(), "max_pool2d", [&] {
    const scalar_t* px = x.data_ptr<scalar_t>();
    scalar_t* py = out[0].data_ptr<scalar_t>();
    for_planes(g,
               [&](int64_t p) { max_pool2d_plane(px + p * g.H * g.W, g, py + p * g.OH * g.OW, pi + p * g.OH * g.OW); });
  });
}
TR_REGISTER_KERNEL(max_pool2d, CPU, max_pool2d_cpu);

// gx[p, idx[p, o]] += gy[p, o] for each plane p (gx assigned: zero first)
void max_pool2d_backward_cpu(const Ins& in, Outs& out, const Attrs& a) {
  Tensor gy = in[0].contiguous(), idx = in[1].contiguous();
  Geom g{out[0].size(0) * out[0].size(1), out[0].size(2), out[0].size(3), gy.size(2), gy.size(3), 1, 1, 1, 1, 0, 0};
  const int64_t HW = g.H * g.W, P = g.OH * g.OW;
  const int64_t* pi = idx.data_ptr<int64_t>();
  std::atomic<bool> bad{false};
  TR_DISPATCH_FLOAT(gy.dtype(), "max_pool2d_backward", [&] {
    using A = acc_t<scalar_t>;
    const scalar_t* pg = gy.data_ptr<scalar_t>();
    scalar_t* px = out[0].data_ptr<scalar_t>();
    parallel_for(g.planes, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, HW + P)), [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        scalar_t* xp = px + p * HW;
        std::fill(xp, xp + HW, scalar_t(0));
        const scalar_t* gp = pg + p * P;
        const int64_t* ip = pi + p * P;
        for (int64_t o = 0; o < P; ++o) {
          const int64_t i = ip[o];
          if (i < 0 || i >= HW) {
            bad = true;
            continue;
          }
          xp[i] = scalar_t(A(xp[i]) + A(gp[o]));
        }
      }
    });
  });
  TR_CHECK(!bad, "max_pool2d_backward: an index is outside the ", g.H, " x ", g.W, " input plane");
}
TR_REGISTER_KERNEL(max_pool2d_backward, CPU, max_pool2d_backward_cpu);

// y[oh, ow] = sum over the window of x / divisor
void avg_pool2d_cpu(const Ins& in, Outs& out, const Attrs& a) {
  Tensor x = in[0].contiguous();
  Geom g = pool_geom(x.sizes(), out[0].sizes(), a);
  bool cip = a.b("count_include_pad");
  TR_DISPATCH_FLOAT(x.dtype(), "avg_pool2d", [&] {
    using A = acc_t<scalar_t>;
    const scalar_t* px = x.data_ptr<scalar_t>();
    scalar_t* py = out[0].data_ptr<scalar_t>();
    for_planes(g, [&](int64_t p) {
      const scalar_t* xp = px + p * g.H * g.W;
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow)
          py[(p * g.OH + oh) * g.OW + ow] = scalar_t(pool::avg_at<A>(xp, g, oh, ow, cip));
    });
  });
}
TR_REGISTER_KERNEL(avg_pool2d, CPU, avg_pool2d_cpu);

// gx[ih, iw] = sum over the windows containing (ih, iw) of gy[oh, ow] / divisor (gx assigned)
void avg_pool2d_backward_cpu(const Ins& in, Outs& out, const Attrs& a) {
  Tensor gy = in[0].contiguous();
  Geom g = pool_geom(out[0].sizes(), gy.sizes(), a);
  bool cip = a.b("count_include_pad");
  TR_DISPATCH_FLOAT(gy.dtype(), "avg_pool2d_backward", [&] {
    using A = acc_t<scalar_t>;
    const scalar_t* py = gy.data_ptr<scalar_t>();
    scalar_t* px = out[0].data_ptr<scalar_t>();
    for_planes(g, [&](int64_t p) {
      std::vector<A> acc(size_t(g.H * g.W), A(0));
      const scalar_t* yp = py + p * g.OH * g.OW;
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          pool::AvgWindow win = pool::avg_window(g, oh, ow, cip);
          A v = A(yp[oh * g.OW + ow]) / A(win.div);
          for (int64_t ih = win.h0; ih < win.h1; ++ih)
            for (int64_t iw = win.w0; iw < win.w1; ++iw) acc[size_t(ih * g.W + iw)] += v;
        }
      scalar_t* xp = px + p * g.H * g.W;
      for (int64_t k = 0; k < g.H * g.W; ++k) xp[k] = scalar_t(acc[size_t(k)]);
    });
  });
}
TR_REGISTER_KERNEL(avg_pool2d_backward, CPU, avg_pool2d_backward_cpu);

}  // namespace
}  // namespace tr::cpu
