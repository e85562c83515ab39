// CPU kernels of the Philox random fills (same formulas as the CUDA kernels, core/philox.h).
#include "core/philox.h"
#include "ops/cpu/loops.h"
#include "ops/registry.h"

namespace tr::cpu {

namespace {

template <typename F>
void fill_stream(const Tensor& t, const F& f) {
  Tensor c = t.is_contiguous() ? t : empty_like(t);
  TR_DISPATCH_FLOAT(t.dtype(), "random", [&] {
    scalar_t* p = c.data_ptr<scalar_t>();
    parallel_for(c.numel(), 4096, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = scalar_t(acc_t<scalar_t>(f(uint64_t(i))));
    });
  });
  if (!c.is_same(t)) t.detach().copy_(c);
}

void uniform_cpu(const std::vector<Tensor>& in, std::vector<Tensor>&, const Attrs& a) {
  uint64_t seed = uint64_t(a.i("seed")), off = uint64_t(a.i("offset"));
  double lo = a.f("low"), hi = a.f("high");
  fill_stream(in[0], [&](uint64_t i) { return lo + (hi - lo) * philox_uniform_at(seed, off, i); });
}
void normal_cpu(const std::vector<Tensor>& in, std::vector<Tensor>&, const Attrs& a) {
  uint64_t seed = uint64_t(a.i("seed")), off = uint64_t(a.i("offset"));
  double m = a.f("mean"), s = a.f("std");
  fill_stream(in[0], [&](uint64_t i) { return m + s * philox_normal_at(seed, off, i); });
}
void dropout_mask_cpu(const std::vector<Tensor>&, std::vector<Tensor>& out, const Attrs& a) {
  uint64_t seed = uint64_t(a.i("seed")), off = uint64_t(a.i("offset"));
  double p = a.f("p"), scale = 1.0 / (1.0 - p);
  fill_stream(out[0], [&](uint64_t i) { return philox_uniform_at(seed, off, i) >= p ? scale : 0.0; });
}
TR_REGISTER_KERNEL(uniform_, CPU, uniform_cpu);
TR_REGISTER_KERNEL(normal_, CPU, normal_cpu);
TR_REGISTER_KERNEL(dropout_mask, CPU, dropout_mask_cpu);

}  // namespace
}  // namespace tr::cpu
