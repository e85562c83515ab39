// CPU kernels of index_select, index_add, gather and scatter_add (bounds-checked indices).
#include "ops/cpu/loops.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::cpu {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

std::vector<int64_t> read_index(const Tensor& idx, int64_t bound, const char* op) {
  std::vector<int64_t> r(size_t(idx.numel()));
  Tensor c = idx.contiguous();
  for (int64_t i = 0; i < idx.numel(); ++i) {
    int64_t v = idx.dtype() == DType::I64 ? c.data_ptr<int64_t>()[i] : c.data_ptr<int32_t>()[i];
    if (v < 0) v += bound;
    TR_CHECK(v >= 0 && v < bound, op, ": index ", v, " is out of bounds for dimension with size ", bound);
    r[size_t(i)] = v;
  }
  return r;
}

// Geometry [outer, n, inner] of a contiguous tensor around `dim`.
void split_dims(const Shape& s, int64_t dim, int64_t& outer, int64_t& inner) {
  outer = 1;
  inner = 1;
  for (int64_t i = 0; i < dim; ++i) outer *= s[i];
  for (int64_t i = dim + 1; i < int64_t(s.size()); ++i) inner *= s[i];
}

// out[o, j, i] = x[o, idx[j], i]
void index_select_cpu(const Ins& in, Outs& out, const Attrs& a) {
  const Tensor x = in[0].contiguous();
  int64_t dim = a.i("dim");
  int64_t n = x.dim() ? x.size(dim) : 1;
  auto idx = read_index(in[1], n, "index_select");
  int64_t outer, inner;
  split_dims(x.sizes(), dim, outer, inner);
  int64_t m = int64_t(idx.size());
  size_t bytes = size_t(inner) * x.element_size();
  const char* px = static_cast<const char*>(x.raw_data());
  char* po = static_cast<char*>(out[0].raw_data());
  parallel_for(outer * m, std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t o = r / m, j = r % m;
      std::memcpy(po + size_t(r) * bytes, px + size_t(o * n + idx[size_t(j)]) * bytes, bytes);
    }
  });
}
TR_REGISTER_KERNEL(index_select, CPU, index_select_cpu);

// out = x; out[o, idx[j], i] += src[o, j, i]
void index_add_cpu(const Ins& in, Outs& out, const Attrs& a) {
  out[0].copy_(in[0]);
  int64_t dim = a.i("dim");
  int64_t n = out[0].dim() ? out[0].size(dim) : 1;
  auto idx = read_index(in[1], n, "index_add");
  Tensor src = in[2].contiguous();
  int64_t outer, inner;
  split_dims(out[0].sizes(), dim, outer, inner);
  int64_t m = int64_t(idx.size());
  TR_DISPATCH_NUMERIC(out[0].dtype(), "index_add", [&] {
    using A = acc_t<scalar_t>;
    scalar_t* po = out[0].data_ptr<scalar_t>();
    const scalar_t* ps = src.data_ptr<scalar_t>();
    // parallel over outer x inner columns; rows with equal indices accumulate in order
    parallel_for(outer, 1, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o)
        for (int64_t j = 0; j < m; ++j) {
          scalar_t* dst = po + (o * n + idx[size_t(j)]) * inner;
          const scalar_t* s = ps + (o * m + j) * inner;
          for (int64_t i = 0; i < inner; ++i) dst[i] = scalar_t(A(dst[i]) + A(s[i]));
        }
    });
  });
}
TR_REGISTER_KERNEL(index_add, CPU, index_add_cpu);

// Visits every position p of `index` (row-major), giving its linear offset in a tensor of
// strides `st` with p[dim] replaced by the index value.
template <typename F> void for_each_index(const Tensor& index, int64_t dim, int64_t bound, const char* op, const F& f) {
  Tensor idx = index.contiguous();
  const Shape& s = idx.sizes();
  int64_t nd = idx.dim();
  std::vector<int64_t> pos(size_t(nd), 0);
  int64_t total = idx.numel();
  for (int64_t lin = 0; lin < total; ++lin) {
    int64_t v = idx.dtype() == DType::I64 ? idx.data_ptr<int64_t>()[lin] : idx.data_ptr<int32_t>()[lin];
    if (v < 0) v += bound;
    TR_CHECK(v >= 0 && v < bound, op, ": index ", v, " is out of bounds for dimension ", dim, " with size ", bound);
    f(pos, v);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++pos[size_t(d)] < s[size_t(d)]) break;
      pos[size_t(d)] = 0;
    }
  }
}

// out[p] = x[p with p[dim] = index[p]]
void gather_cpu(const Ins& in, Outs& out, const Attrs& a) {
  const Tensor& x = in[0];
  int64_t dim = a.i("dim");
  TR_DISPATCH_ALL(x.dtype(), "gather", [&] {
    const scalar_t* px = static_cast<const scalar_t*>(x.raw_data());
    scalar_t* po = out[0].data_ptr<scalar_t>();
    int64_t k = 0;
    for_each_index(in[1], dim, x.dim() ? x.size(dim) : 1, "gather", [&](const std::vector<int64_t>& p, int64_t v) {
      int64_t off = 0;
      for (size_t d = 0; d < p.size(); ++d) off += (int64_t(d) == dim ? v : p[d]) * x.stride(int64_t(d));
      po[k++] = px[off];
    });
  });
}
TR_REGISTER_KERNEL(gather, CPU, gather_cpu);

// out = x; out[p with p[dim] = index[p]] += src[p]
void scatter_add_cpu(const Ins& in, Outs& out, const Attrs& a) {
  out[0].copy_(in[0]);
  int64_t dim = a.i("dim");
  const Tensor& src = in[2];
  const Tensor& o = out[0];
  TR_DISPATCH_NUMERIC(o.dtype(), "scatter_add", [&] {
    using A = acc_t<scalar_t>;
    scalar_t* po = o.data_ptr<scalar_t>();
    const scalar_t* ps = static_cast<const scalar_t*>(src.raw_data());
    for_each_index(in[1], dim, o.dim() ? o.size(dim) : 1, "scatter_add", [&](const std::vector<int64_t>& p, int64_t v) {
      int64_t off = 0, soff = 0;
      for (size_t d = 0; d < p.size(); ++d) {
        off += (int64_t(d) == dim ? v : p[d]) * o.stride(int64_t(d));
        soff += p[d] * src.stride(int64_t(d));
      }
      po[off] = scalar_t(A(po[off]) + A(ps[soff]));
    });
  });
}
TR_REGISTER_KERNEL(scatter_add, CPU, scatter_add_cpu);

}  // namespace
}  // namespace tr::cpu
