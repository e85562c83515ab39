// CPU kernels of _fused_total_norm and _fused_clip_scale_: each tensor in chunks of kNormChunk
// elements (the chunks of all tensors split over the pool), ops/clip_math.h per element.
#include <algorithm>
#include "ops/clip_math.h"
#include "ops/cpu/loops.h"
#include "ops/registry.h"

namespace tr::cpu {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;
using clip_math::kNormChunk;

struct Chunk {
  size_t tensor;
  int64_t start;
};
std::vector<Chunk> chunks_of(const Ins& ts) {
  std::vector<Chunk> cs;
  for (size_t i = 0; i < ts.size(); ++i)
    for (int64_t s = 0; s < ts[i].numel(); s += kNormChunk) cs.push_back({i, s});
  return cs;
}

void total_norm_cpu(const Ins& in, Outs& out, const Attrs& a) {
  TR_DISPATCH_FLOAT(in[0].dtype(), "_fused_total_norm", [&] {
    using A = acc_t<scalar_t>;
    const A p = A(a.f("norm_type"));
    const std::vector<Chunk> cs = chunks_of(in);
    std::vector<A> partial(cs.size(), A(0));
    parallel_for(int64_t(cs.size()), 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        const scalar_t* x = in[cs[size_t(c)].tensor].data_ptr<scalar_t>();
        const int64_t s = cs[size_t(c)].start, end = std::min(s + kNormChunk, in[cs[size_t(c)].tensor].numel());
        A acc = A(0);
        for (int64_t k = s; k < end; ++k) acc = clip_math::norm_combine(acc, clip_math::norm_term(A(x[k]), p), p);
        partial[size_t(c)] = acc;
      }
    });
    // each tensor's norm rounded to its dtype (torch's per-gradient norms), then the norm of those
    A total = A(0);
    for (size_t c = 0, i = 0; i < in.size(); ++i) {
      A s = A(0);
      for (; c < cs.size() && cs[c].tensor == i; ++c) s = clip_math::norm_combine(s, partial[c], p);
      const A n = A(scalar_t(clip_math::norm_finish(s, p)));
      total = clip_math::norm_combine(total, clip_math::norm_term(n, p), p);
    }
    *out[0].data_ptr<scalar_t>() = scalar_t(clip_math::norm_finish(total, p));
  });
}
TR_REGISTER_KERNEL(_fused_total_norm, CPU, total_norm_cpu);

void clip_scale_cpu(const Ins& in, Outs&, const Attrs& a) {
  const Ins ts(in.begin(), in.end() - 1);
  TR_DISPATCH_FLOAT(ts[0].dtype(), "_fused_clip_scale_", [&] {
    using A = acc_t<scalar_t>;
    const A coef = A(scalar_t(clip_math::clip_coef(A(*in.back().data_ptr<scalar_t>()), A(a.f("max_norm")))));
    for (const Tensor& t : ts) {
      scalar_t* x = t.data_ptr<scalar_t>();
      parallel_for(t.numel(), kGrain, [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) x[k] = scalar_t(A(x[k]) * coef);
      });
    }
  });
}
TR_REGISTER_KERNEL(_fused_clip_scale_, CPU, clip_scale_cpu);

}  // namespace

}  // namespace tr::cpu
