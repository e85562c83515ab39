// CPU kernels of _fused_sgd_ and _fused_adam_: one pass over each parameter's elements (split
// over the pool), the update of ops/optim_math.h per element in the compute type.
#include "ops/cpu/loops.h"
#include "ops/fused_optim.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::cpu {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

// Elements [b, e), one loop per case of the optional state, so that each loop body is free of
// branches and stores it may skip (the compiler then vectorises it); the tensors never overlap.
template <typename A, typename T> void sgd_range(T* __restrict p, const T* __restrict g, T* __restrict buf, bool first,
                                                 int64_t b, int64_t e, const optim_math::SgdScalars<A> s) {
  using namespace optim_math;
  if (!buf) {
    for (int64_t k = b; k < e; ++k) {
      const A pk = A(p[k]), d = sgd_direction<A>(pk, A(g[k]), s);
      p[k] = T(sgd_param<A>(pk, d, A(0), s));
    }
  } else if (first) {
    for (int64_t k = b; k < e; ++k) {
      const A pk = A(p[k]), d = sgd_direction<A>(pk, A(g[k]), s), bk = sgd_buffer<A>(d, A(0), true, s);
      p[k] = T(sgd_param<A>(pk, d, bk, s));
      buf[k] = T(bk);
    }
  } else {
    for (int64_t k = b; k < e; ++k) {
      const A pk = A(p[k]), d = sgd_direction<A>(pk, A(g[k]), s), bk = sgd_buffer<A>(d, A(buf[k]), false, s);
      p[k] = T(sgd_param<A>(pk, d, bk, s));
      buf[k] = T(bk);
    }
  }
}
template <typename A, typename T> void adam_range(T* __restrict p, const T* __restrict g, T* __restrict m,
                                                  T* __restrict v, T* __restrict vmax, int64_t b, int64_t e,
                                                  const optim_math::AdamScalars<A> s) {
  using namespace optim_math;
  if (!vmax) {
    for (int64_t k = b; k < e; ++k) {
      const A p0 = A(p[k]), gk = adam_grad<A>(A(g[k]), p0, s);
      const A mk = adam_m<A>(A(m[k]), gk, s), vk = adam_v<A>(A(v[k]), gk, s);
      p[k] = T(adam_param<A>(adam_decayed<A>(p0, s), mk, vk, s));
      m[k] = T(mk);
      v[k] = T(vk);
    }
  } else {
    for (int64_t k = b; k < e; ++k) {
      const A p0 = A(p[k]), gk = adam_grad<A>(A(g[k]), p0, s);
      const A mk = adam_m<A>(A(m[k]), gk, s), vk = adam_v<A>(A(v[k]), gk, s), xk = nan_max(A(vmax[k]), vk);
      p[k] = T(adam_param<A>(adam_decayed<A>(p0, s), mk, s.amsgrad ? xk : vk, s));
      m[k] = T(mk);
      v[k] = T(vk);
      vmax[k] = T(xk);
    }
  }
}

void fused_sgd_cpu(const Ins& in, Outs&, const Attrs& a) {
  const std::vector<int64_t>& first = a.ints("first");
  const size_t n = first.size();
  const bool momentum = a.f("momentum") != 0;
  for (size_t i = 0; i < n; ++i) {
    TR_DISPATCH_FLOAT(in[i].dtype(), "_fused_sgd_", [&] {
      using A = acc_t<scalar_t>;
      const optim_math::SgdScalars<A> s = optim_math::scalars_as<A>(sgd_scalars(a));
      scalar_t* p = in[i].data_ptr<scalar_t>();
      const scalar_t* g = in[n + i].data_ptr<scalar_t>();
      scalar_t* buf = momentum ? in[2 * n + i].data_ptr<scalar_t>() : nullptr;
      const bool f = first[i] != 0;
      parallel_for(in[i].numel(), kGrain, [&](int64_t b, int64_t e) { sgd_range<A>(p, g, buf, f, b, e, s); });
    });
  }
}
TR_REGISTER_KERNEL(_fused_sgd_, CPU, fused_sgd_cpu);

void fused_adam_cpu(const Ins& in, Outs&, const Attrs& a) {
  const std::vector<int64_t>& steps = a.ints("steps");
  const size_t n = steps.size();
  const bool amsgrad = a.b("amsgrad");
  for (size_t i = 0; i < n; ++i) {
    TR_DISPATCH_FLOAT(in[i].dtype(), "_fused_adam_", [&] {
      using A = acc_t<scalar_t>;
      const optim_math::AdamScalars<A> s = optim_math::scalars_as<A>(adam_scalars(a, double(steps[i])));
      scalar_t* p = in[i].data_ptr<scalar_t>();
      const scalar_t* g = in[n + i].data_ptr<scalar_t>();
      scalar_t* m = in[2 * n + i].data_ptr<scalar_t>();
      scalar_t* v = in[3 * n + i].data_ptr<scalar_t>();
      scalar_t* vmax = amsgrad ? in[4 * n + i].data_ptr<scalar_t>() : nullptr;
      parallel_for(in[i].numel(), kGrain, [&](int64_t b, int64_t e) { adam_range<A>(p, g, m, v, vmax, b, e, s); });
    });
  }
}
TR_REGISTER_KERNEL(_fused_adam_, CPU, fused_adam_cpu);

}  // namespace

}  // namespace tr::cpu
