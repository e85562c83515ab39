// CUDA launchers of index_select, index_add, gather and scatter_add. Indices become contiguous
// int64; the kernels record the first out-of-range position (and skip it), raised with the CPU's
// message when the host next waits for the device.
#include <climits>
#include "core/cuda/cuda_check.h"
#include "ops/cuda/tensor_args.h"
#include "ops/deferred_check.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tr::cuda {

namespace {

using Ins = std::vector<Tensor>;
using Outs = std::vector<Tensor>;

Tensor int64_index(const Tensor& idx) {
  Tensor i = idx.dtype() == DType::I64 ? idx : cast(idx, DType::I64);
  return i.contiguous();
}

// The device word in which kernels record the smallest position of an invalid index; checked when
// the host next waits for the device (ops/deferred_check.h), so a launch never stalls the host.
class IndexError {
 public:
  explicit IndexError(Device d) : buf_(error_word(d)) {}
  unsigned long long* ptr() const { return static_cast<unsigned long long*>(buf_.raw_data()); }
  // Raises "<op>: index v is out of bounds ..." (v counted from the end when negative, as the CPU).
  void check(const char* op, const Tensor& idx, int64_t bound, int64_t dim, bool with_dim) const {
    check_on_sync(buf_, -1, [op, idx, bound, dim, with_dim](int64_t pos) {
      int64_t v = int64_t(idx.reshape({-1}).select(0, pos).item());
      if (v < 0) v += bound;
      throw Error(str(op, ": index ", v, " is out of bounds for dimension ", with_dim ? str(dim, " ") : std::string(),
                      "with size ", bound, " (found by the CUDA kernel, raised at the next wait for the device)"));
    });
  }

 private:
  Tensor buf_;
};

// [outer, n, inner] around dim of a shape.
void split_dims(const Shape& s, int64_t dim, int64_t& outer, int64_t& inner) {
  outer = 1;
  inner = 1;
  for (int64_t i = 0; i < dim; ++i) outer *= s[size_t(i)];
  for (int64_t i = dim + 1; i < int64_t(s.size()); ++i) inner *= s[size_t(i)];
}

// out[o, j, i] = x[o, idx[j], i]
void index_select_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard g(out[0]);
  const Tensor x = in[0].contiguous();
  const int64_t dim = a.i("dim");
  const int64_t n = x.dim() ? x.size(dim) : 1;
  Tensor idx = int64_index(in[1]);
  int64_t outer, inner;
  split_dims(x.sizes(), dim, outer, inner);
  IndexError err(out[0].device());
  launch_index_select(x.element_size(), x.raw_data(), out[0].raw_data(), idx.data_ptr<int64_t>(), outer, n, idx.numel(),
                      inner, err.ptr());
  err.check("index_select", idx, n, dim, false);
}
TR_REGISTER_KERNEL(index_select, CUDA, index_select_cuda);

// out = x; out[o, idx[j], i] += src[o, j, i]
void index_add_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard g(out[0]);
  out[0].copy_(in[0]);
  const int64_t dim = a.i("dim");
  const int64_t n = out[0].dim() ? out[0].size(dim) : 1;
  Tensor idx = int64_index(in[1]);
  const Tensor src = in[2].contiguous();
  TR_CHECK(src.dtype() == out[0].dtype(), "index_add: source dtype ", dtype_name(src.dtype()), " differs from ",
           dtype_name(out[0].dtype()));
  int64_t outer, inner;
  split_dims(out[0].sizes(), dim, outer, inner);
  IndexError err(out[0].device());
  launch_index_add(out[0].dtype(), out[0].raw_data(), src.raw_data(), idx.data_ptr<int64_t>(), outer, n, idx.numel(),
                   inner, err.ptr());
  err.check("index_add", idx, n, dim, false);
}
TR_REGISTER_KERNEL(index_add, CUDA, index_add_cuda);

// Geometry over the index's shape, with the strides of `x` (gather's input or scatter's output).
IndexArgs index_args(const char* op, const Tensor& idx, const Tensor& x, const Tensor* src, int64_t dim) {
  TR_CHECK(idx.dim() <= kMaxIndexDims, op, " on CUDA supports up to ", kMaxIndexDims, " dims, got shape ", idx.sizes());
  IndexArgs a;
  a.numel = idx.numel();
  a.bound = x.dim() ? x.size(dim) : 1;
  a.dim = int(dim);
  if (idx.dim() == 0) {
    a.ndim = 1;
    a.sizes[0] = 1;
    return a;  // strides 0: the one element of x
  }
  a.ndim = int(idx.dim());
  for (int d = 0; d < a.ndim; ++d) {
    a.sizes[d] = idx.size(d);
    a.x_strides[d] = x.stride(d);
    if (src) a.src_strides[d] = src->stride(d);
  }
  return a;
}

// out[p] = x[p with p[dim] = index[p]]
void gather_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard g(out[0]);
  const Tensor& x = in[0];
  const int64_t dim = a.i("dim");
  Tensor idx = int64_index(in[1]);
  IndexArgs args = index_args("gather", idx, x, nullptr, dim);
  IndexError err(out[0].device());
  launch_gather(x.element_size(), args, x.raw_data(), out[0].raw_data(), idx.data_ptr<int64_t>(), err.ptr());
  err.check("gather", idx, args.bound, dim, true);
}
TR_REGISTER_KERNEL(gather, CUDA, gather_cuda);

// out = x; out[p with p[dim] = index[p]] += src[p]
void scatter_add_cuda(const Ins& in, Outs& out, const Attrs& a) {
  DeviceGuard g(out[0]);
  out[0].copy_(in[0]);
  const int64_t dim = a.i("dim");
  const Tensor& src = in[2];
  TR_CHECK(src.dtype() == out[0].dtype(), "scatter_add: source dtype ", dtype_name(src.dtype()), " differs from ",
           dtype_name(out[0].dtype()));
  Tensor idx = int64_index(in[1]);
  IndexArgs args = index_args("scatter_add", idx, out[0], &src, dim);
  IndexError err(out[0].device());
  launch_scatter_add(out[0].dtype(), args, out[0].raw_data(), src.raw_data(), idx.data_ptr<int64_t>(), err.ptr());
  err.check("scatter_add", idx, args.bound, dim, true);
}
TR_REGISTER_KERNEL(scatter_add, CUDA, scatter_add_cuda);

}  // namespace

}  // namespace tr::cuda
