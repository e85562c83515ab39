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

void fused_sgd_cpu(const Ins& in, Outs&, const Attrs& a) {
  const std::vector<int64_t>& first = a.ints("first");
  const size_t n = first.size();
  const bool momentum = a.f("momentum") != 0;
  for (size_t i = 0; i < n; ++i) {
    TR_DISPATCH_FLOAT(in[i].dtype(), "_fused_sgd_", [&] {
      using A = acc_t<scalar_t>;
      const optim_math::SgdScalars<A> s = sgd_scalars<A>(a);
      scalar_t* p = in[i].data_ptr<scalar_t>();
      const scalar_t* g = in[n + i].data_ptr<scalar_t>();
      scalar_t* buf = momentum ? in[2 * n + i].data_ptr<scalar_t>() : nullptr;
      const bool f = first[i] != 0;
      parallel_for(in[i].numel(), kGrain, [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) optim_math::sgd_at<A>(p, g, buf, f, k, s);
      });
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
      const optim_math::AdamScalars<A> s = adam_scalars_as<A>(adam_scalars(a, double(steps[i])));
      scalar_t* p = in[i].data_ptr<scalar_t>();
      const scalar_t* g = in[n + i].data_ptr<scalar_t>();
      scalar_t* m = in[2 * n + i].data_ptr<scalar_t>();
      scalar_t* v = in[3 * n + i].data_ptr<scalar_t>();
      scalar_t* vmax = amsgrad ? in[4 * n + i].data_ptr<scalar_t>() : nullptr;
      parallel_for(in[i].numel(), kGrain, [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) optim_math::adam_at<A>(p, g, m, v, vmax, k, s);
      });
    });
  }
}
TR_REGISTER_KERNEL(_fused_adam_, CPU, fused_adam_cpu);

}  // namespace

}  // namespace tr::cpu
