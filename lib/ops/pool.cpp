// 2-D pooling (NCHW): max_pool2d (values + flat H*W argmax indices) with max_pool2d_backward
// (gradient routed to the argmax; its backward is gather), and avg_pool2d with its adjoint
// avg_pool2d_backward (each the other's backward).
// Attrs: kernel, stride, padding ({h, w}); dilation (max) or count_include_pad (avg); input_size.
#include "ops/ops.h"
#include "ops/pool_geom.h"
#include "ops/registry.h"

namespace tr {

namespace {

void check_float(const char* op, const Tensor& x) {
  TR_CHECK(is_floating(x.dtype()), op, ": expected a floating point input, got ", dtype_name(x.dtype()), " of shape ",
           x.sizes());
}

Attrs without_input_size(const Attrs& a) {
  return {{"kernel", a.ints("kernel")},
          {"stride", a.ints("stride")},
          {"padding", a.ints("padding")},
          {"count_include_pad", a.b("count_include_pad")}};
}

}  // namespace

// Output shape [N, C, OH, OW], OH = (H + 2 PH - DH (KH - 1) - 1) / SH + 1 (floor, torch's ceil_mode=False).
Shape pool_out_shape(const char* op, const Shape& x, const Attrs& a) {
  const Pair &k = a.ints("kernel"), &s = a.ints("stride"), &p = a.ints("padding");
  Pair dil = a.has("dilation") ? a.ints("dilation") : Pair{1, 1};
  TR_CHECK(x.size() == 4, op, ": expected a 4-D input [N, C, H, W], got shape ", x);
  Shape out{x[0], x[1], 0, 0};
  for (int d = 0; d < 2; ++d) {
    int64_t eff = dil[d] * (k[d] - 1) + 1;
    TR_CHECK(p[d] <= eff / 2, op, ": padding should be at most half of the effective kernel size, got padding ", p,
             ", kernel ", k, " and dilation ", dil);
    int64_t padded = x[2 + d] + 2 * p[d];
    TR_CHECK(padded >= eff, op, ": output size would be <= 0: input of shape ", x, " padded to (", x[2] + 2 * p[0],
             " x ", x[3] + 2 * p[1], ") is smaller than the kernel ", k, " (dilation ", dil, ")");
    out[2 + d] = (padded - eff) / s[d] + 1;
  }
  return out;
}

pool::Geom pool_geom(const Shape& x, const Shape& y, const Attrs& a) {
  const Pair &k = a.ints("kernel"), &s = a.ints("stride"), &p = a.ints("padding");
  pool::Geom g{x[0] * x[1], x[2], x[3], y[2], y[3], k[0], k[1], s[0], s[1], p[0], p[1]};
  if (a.has("dilation")) {
    g.DH = a.ints("dilation")[0];
    g.DW = a.ints("dilation")[1];
  }
  return g;
}

// (y, idx) = max over each window; idx is the flat position ih * W + iw in the input plane.
// dx = max_pool2d_backward(g, idx).
TR_REGISTER_OP(max_pool2d) {
  d.num_inputs = 1;
  d.save_inputs = false;
  d.save_outputs = true;
  d.unsaved_outputs = 1u << 0;  // the backward needs the indices only
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    check_float("max_pool2d", in[0]);
    Shape s = pool_out_shape("max_pool2d", in[0].sizes(), a);
    return {{s, in[0].dtype()}, {s, DType::I64}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    // the window attrs let a kernel gather each input's gradient from the windows over it
    Attrs a = c.attrs;
    a.set("input_size", c.input_specs[0].sizes);
    return {dispatch1("max_pool2d_backward", {c.grads[0], c.outputs[1]}, a)};
  };
}

// gx[n, c, idx[n, c, o]] += gy[n, c, o] over the outputs o of each plane (gx starts at zero): the
// adjoint of gathering each plane at idx, so its backward is that gather of the incoming gradient.
// Attr: input_size. idx (int64) gets no gradient.
TR_REGISTER_OP(max_pool2d_backward) {
  d.num_inputs = 2;
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    const char* op = "max_pool2d_backward";
    const Tensor &gy = in[0], &idx = in[1];
    check_float(op, gy);
    const Shape& xs = a.ints("input_size");
    TR_CHECK(gy.dim() == 4 && xs.size() == 4 && gy.size(0) == xs[0] && gy.size(1) == xs[1], op,
             ": grad_output of shape ", gy.sizes(), " does not pool an input of size ", xs);
    TR_CHECK(idx.dtype() == DType::I64 && idx.sizes() == gy.sizes(), op, ": indices (", dtype_name(idx.dtype()),
             ", shape ", idx.sizes(), ") must be int64 of the grad_output's shape ", gy.sizes());
    return {{xs, gy.dtype()}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    const Shape& ys = c.input_specs[0].sizes;
    const Tensor& g = c.grads[0];
    Tensor idx = reshape(c.inputs[1], {ys[0], ys[1], -1});
    return {reshape(gather(reshape(g, {g.size(0), g.size(1), -1}), 2, idx), ys), Tensor()};
  };
}

// y = mean over each window (divisor: the window inside the padded input, or only its part
// inside the input when count_include_pad is false). Linear: dx = avg_pool2d_backward(g).
TR_REGISTER_OP(avg_pool2d) {
  d.num_inputs = 1;
  d.save_inputs = false;
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    check_float("avg_pool2d", in[0]);
    return {{pool_out_shape("avg_pool2d", in[0].sizes(), a), in[0].dtype()}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    Attrs a = without_input_size(c.attrs);
    a.set("input_size", c.input_specs[0].sizes);
    return {dispatch1("avg_pool2d_backward", {c.grads[0]}, a)};
  };
}

// gx = the adjoint of avg_pool2d applied to gy (each gy spread evenly over its window);
// its backward is avg_pool2d again.
TR_REGISTER_OP(avg_pool2d_backward) {
  d.num_inputs = 1;
  d.save_inputs = false;
  d.infer = [](const std::vector<Tensor>& in, const Attrs& a) -> std::vector<TensorSpec> {
    const char* op = "avg_pool2d_backward";
    check_float(op, in[0]);
    const Shape& xs = a.ints("input_size");
    Shape ys = pool_out_shape(op, xs, a);
    TR_CHECK(in[0].sizes() == ys, op, ": grad_output of shape ", in[0].sizes(), " does not match the output shape ", ys,
             " of pooling an input of size ", xs);
    return {{xs, in[0].dtype()}};
  };
  d.backward = [](const BackwardContext& c) -> std::vector<Tensor> {
    return {dispatch1("avg_pool2d", {c.grads[0]}, without_input_size(c.attrs))};
  };
}

// torch.nn.functional.max_pool2d (ceil_mode=False): padding counts as -inf.
Tensor max_pool2d(const Tensor& x, Pair kernel, Pair stride, Pair padding, Pair dilation) {
  const char* op = "max_pool2d";
  Pair k = expand_pair(kernel, op, "kernel_size", 1);
  Pair s = stride.empty() ? k : expand_pair(stride, op, "stride", 1);
  TR_CHECK(x.dim() == 4, op, ": expected a 4-D input [N, C, H, W], got shape ", x.sizes());
  return dispatch("max_pool2d", {x},
                  {{"kernel", k},
                   {"stride", s},
                   {"padding", expand_pair(padding, op, "padding", 0)},
                   {"dilation", expand_pair(dilation, op, "dilation", 1)}})[0];
}

// torch.nn.functional.avg_pool2d (ceil_mode=False, no divisor_override).
Tensor avg_pool2d(const Tensor& x, Pair kernel, Pair stride, Pair padding, bool count_include_pad) {
  const char* op = "avg_pool2d";
  Pair k = expand_pair(kernel, op, "kernel_size", 1);
  Pair s = stride.empty() ? k : expand_pair(stride, op, "stride", 1);
  TR_CHECK(x.dim() == 4, op, ": expected a 4-D input [N, C, H, W], got shape ", x.sizes());
  return dispatch1("avg_pool2d", {x},
                   {{"kernel", k},
                    {"stride", s},
                    {"padding", expand_pair(padding, op, "padding", 0)},
                    {"count_include_pad", count_include_pad}});
}

}  // namespace tr
