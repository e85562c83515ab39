// CUDA launchers of softmax / log_softmax along attr `dim`: rows read and written in place of
// their strides (no permuted copy), as long as the other dims merge into kMaxDims.
#include "ops/cuda/tensor_args.h"
#include "ops/registry.h"

namespace tr::cuda {

namespace {

// Geometry of the rows of x (and of out, same shape) along dim; false if too many dims.
bool softmax_args(const Tensor& x, const Tensor& out, int64_t dim, SoftmaxArgs& a) {
  a = SoftmaxArgs{};
  a.in = x.raw_data();
  a.out = out.raw_data();
  if (x.dim() == 0) {
    a.rows = 1;
    a.len = 1;
    return true;
  }
  a.len = x.size(dim);
  a.in_dim_stride = x.stride(dim);
  a.out_dim_stride = out.stride(dim);
  a.rows = a.len ? x.numel() / a.len : 0;
  Shape sizes, in_st, out_st;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d == dim || x.size(d) == 1) continue;
    if (!sizes.empty() && in_st.back() == x.stride(d) * x.size(d) && out_st.back() == out.stride(d) * x.size(d)) {
      sizes.back() *= x.size(d);
      in_st.back() = x.stride(d);
      out_st.back() = out.stride(d);
      continue;
    }
    sizes.push_back(x.size(d));
    in_st.push_back(x.stride(d));
    out_st.push_back(out.stride(d));
  }
  if (sizes.size() > size_t(kMaxDims)) return false;
  a.ndim = int(sizes.size());
  for (int i = 0; i < a.ndim; ++i) {
    a.sizes[i] = sizes[size_t(i)];
    a.in_strides[i] = in_st[size_t(i)];
    a.out_strides[i] = out_st[size_t(i)];
  }
  return true;
}

void softmax_common(bool log, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t dim = attrs.i("dim");
  TR_CHECK(out[0].dtype() == in[0].dtype(), log ? "log_softmax" : "softmax", ": output dtype ",
           dtype_name(out[0].dtype()), " differs from input dtype ", dtype_name(in[0].dtype()));
  DeviceGuard g(out[0]);
  SoftmaxArgs a;
  Tensor x = in[0];
  if (!softmax_args(x, out[0], dim, a)) {
    x = x.contiguous();  // out is contiguous too: the dims before and after `dim` merge
    TR_CHECK(softmax_args(x, out[0], dim, a), "softmax: geometry of shape ", x.sizes(), " could not be merged");
  }
  launch_softmax(log, x.dtype(), a);
}

void softmax_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) {
  softmax_common(false, in, out, a);
}
void log_softmax_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& a) {
  softmax_common(true, in, out, a);
}
TR_REGISTER_KERNEL(softmax, CUDA, softmax_cuda);
TR_REGISTER_KERNEL(log_softmax, CUDA, log_softmax_cuda);

// (g, y) -> softmax's gradient along attr dim (attr log: of log_softmax). g is read with y's
// strides, so both are made contiguous where their layouts differ.
void softmax_backward_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t dim = attrs.i("dim");
  TR_CHECK(in[0].dtype() == out[0].dtype() && in[1].dtype() == out[0].dtype(), "softmax_backward: grad_output (",
           dtype_name(in[0].dtype()), ") and output (", dtype_name(in[1].dtype()), ") must have one dtype");
  DeviceGuard dg(out[0]);
  Tensor g = in[0], y = in[1];
  if (g.strides() != y.strides()) {
    g = g.contiguous();
    y = y.contiguous();
  }
  SoftmaxArgs a;
  if (!softmax_args(y, out[0], dim, a)) {
    g = g.contiguous();
    y = y.contiguous();
    TR_CHECK(softmax_args(y, out[0], dim, a), "softmax_backward: geometry of shape ", y.sizes(),
             " could not be merged");
  }
  launch_softmax_backward(attrs.b("log"), y.dtype(), a, g.raw_data());
}
TR_REGISTER_KERNEL(softmax_backward, CUDA, softmax_backward_cuda);

}  // namespace

}  // namespace tr::cuda
